// Plays Ferry's HLS (fMP4 segments, VOD playlists) in a browser that does not play HLS itself, through Media Source
// Extensions: the master playlist's best variant, and its AUDIO rendition when the sound is apart (the ladder) or the
// variant's own sound (a first stream). Segments are fetched once playback is asked for, a little ahead of the
// playhead, and again from where a seek lands; what lies far behind or far ahead is let go, so a long video holds a
// bounded amount of memory. A fetch that fails is tried again, sooner or later, while the page is open.

const AHEAD = 30; // seconds fetched ahead of the playhead
const BEHIND = 30; // seconds kept behind it
const RETRY_MAX = 8000; // milliseconds between tries of a failed fetch, at most

/** Whether this browser can play `codecs` (RFC 6381, comma-separated) through Media Source Extensions. */
export function canPlayThroughMSE(codecs) {
  return typeof MediaSource !== 'undefined' && codecs.split(',').every((codec) =>
    MediaSource.isTypeSupported(`${codec.startsWith('mp4a') ? 'audio' : 'video'}/mp4; codecs="${codec.trim()}"`));
}

/** The attributes of an `#EXT-X-…:` line: `BANDWIDTH=1,CODECS="a,b"` → { BANDWIDTH: '1', CODECS: 'a,b' }. */
function attributes(line) {
  const out = {};
  for (const match of line.slice(line.indexOf(':') + 1).matchAll(/([A-Z0-9-]+)=("[^"]*"|[^,]*)/g)) {
    out[match[1]] = match[2].replace(/^"|"$/g, '');
  }
  return out;
}

async function fetched(url, signal, as) {
  const response = await fetch(url, { signal, credentials: 'omit' });
  if (!response.ok) throw new Error(`the server answered ${response.status}`);
  return as === 'text' ? response.text() : response.arrayBuffer();
}

/** The variant to play and its sound: the highest bandwidth whose codecs play here; null when none does. */
export async function readMaster(url, signal) {
  const lines = (await fetched(url, signal, 'text')).split(/\r?\n/);
  const audio = {};
  const variants = [];
  lines.forEach((line, index) => {
    if (line.startsWith('#EXT-X-MEDIA:')) {
      const media = attributes(line);
      if (media.TYPE === 'AUDIO' && media.URI) audio[media['GROUP-ID']] = new URL(media.URI, url).toString();
    } else if (line.startsWith('#EXT-X-STREAM-INF:')) {
      const stream = attributes(line);
      const uri = lines.slice(index + 1).find((next) => next && !next.startsWith('#'));
      if (uri) variants.push({ bandwidth: Number(stream.BANDWIDTH) || 0, codecs: stream.CODECS || '', group: stream.AUDIO, uri: new URL(uri, url).toString() });
    }
  });
  variants.sort((a, b) => b.bandwidth - a.bandwidth);
  for (const variant of variants) {
    const codecs = variant.codecs.split(',').map((c) => c.trim()).filter(Boolean);
    const audioURL = variant.group ? audio[variant.group] : null;
    // With the sound apart, the variant's codecs name both: the picture's go to one buffer, the sound's to another.
    const tracks = audioURL
      ? [{ url: variant.uri, codecs: codecs.filter((c) => !c.startsWith('mp4a')) }, { url: audioURL, codecs: codecs.filter((c) => c.startsWith('mp4a')) }]
      : [{ url: variant.uri, codecs }];
    if (tracks.every((t) => t.codecs.length && canPlayThroughMSE(t.codecs.join(',')))) return tracks;
  }
  return null;
}

/** A media playlist: its init segment and its segments with their start times. */
async function readMedia(url, signal) {
  const lines = (await fetched(url, signal, 'text')).split(/\r?\n/);
  let init = null;
  let start = 0;
  let length = null;
  const segments = [];
  for (const line of lines) {
    if (line.startsWith('#EXT-X-MAP:')) init = new URL(attributes(line).URI, url).toString();
    else if (line.startsWith('#EXTINF:')) length = parseFloat(line.slice(8));
    else if (line && !line.startsWith('#') && length !== null) {
      segments.push({ url: new URL(line, url).toString(), start, end: start + length });
      start += length;
      length = null;
    }
  }
  if (!init || !segments.length) throw new Error('the playlist names no segments');
  return { init, segments, duration: start };
}

/** Plays the HLS master at `url` (`tracks` from ``readMaster``) in `video`. `problem(message)` is told when fetching
 * fails (and again with null once it works); returns a function that stops it (fetches end, the source goes). */
export function attachStream(video, url, tracks, problem = () => {}) {
  const controller = new AbortController();
  const { signal } = controller;
  const source = new MediaSource();
  const objectURL = URL.createObjectURL(source);
  video.src = objectURL;
  let feeds = [];
  let started = false;
  let retry = null;
  let delay = 1000;

  /** Feeds every buffer what the playhead needs; on a failure, tries again later. */
  async function pump() {
    if (signal.aborted || !feeds.length) return;
    try {
      await Promise.all(feeds.map((feed) => feed.pump()));
      delay = 1000;
      problem(null);
      if (feeds.every((f) => f.done && !f.buffer.updating) && source.readyState === 'open') source.endOfStream();
    } catch (error) {
      if (signal.aborted) return;
      problem(`The stream could not be fetched (${error.message}); trying again.`);
      clearTimeout(retry);
      retry = setTimeout(pump, delay);
      delay = Math.min(delay * 2, RETRY_MAX);
    }
  }

  source.addEventListener('sourceopen', async () => {
    let playlists;
    while (!signal.aborted && !playlists) {
      try {
        playlists = await Promise.all(tracks.map((track) => readMedia(track.url, signal)));
      } catch (error) {
        if (signal.aborted) return;
        problem(`The stream could not be fetched (${error.message}); trying again.`);
        await new Promise((resolve) => { setTimeout(resolve, delay); });
        delay = Math.min(delay * 2, RETRY_MAX);
      }
    }
    if (signal.aborted) return;
    source.duration = Math.max(...playlists.map((p) => p.duration));
    feeds = playlists.map((playlist, index) => feed(source.addSourceBuffer(
      `${tracks[index].codecs.every((c) => c.startsWith('mp4a')) ? 'audio' : 'video'}/mp4; codecs="${tracks[index].codecs.join(',')}"`),
    playlist));
    const ask = () => { started = true; pump(); };
    video.addEventListener('play', ask, { signal });
    video.addEventListener('waiting', ask, { signal });
    video.addEventListener('timeupdate', () => { if (started) pump(); }, { signal });
    video.addEventListener('seeking', () => { feeds.forEach((f) => f.seek(video.currentTime)); ask(); }, { signal });
    // Until playback is asked for (a play() before the source opened counts), only the init segments: what the
    // browser needs to know the stream.
    started = !video.paused || video.autoplay;
    pump();
  }, { once: true, signal });

  /** One SourceBuffer and the segments it is fed, one fetch and append at a time. */
  function feed(buffer, playlist) {
    let next = 0;
    let busy = false;
    let initialized = false;
    /** Resolves when the buffer's current update ends; rejects when the browser could not read what it was given. */
    const updated = () => new Promise((resolve, reject) => {
      const ended = () => { buffer.removeEventListener('error', failed); resolve(); };
      const failed = () => { buffer.removeEventListener('updateend', ended); reject(new Error('the browser could not read a segment')); };
      buffer.addEventListener('updateend', ended, { once: true });
      buffer.addEventListener('error', failed, { once: true });
    });
    const append = async (url) => {
      const bytes = await fetched(url, signal);
      const done = updated();
      buffer.appendBuffer(bytes);
      await done;
    };
    const remove = async (start, end) => {
      const done = updated();
      buffer.remove(start, end);
      await done;
    };
    /** The index of the segment that holds `time`. */
    const segmentAt = (time) => Math.max(0, playlist.segments.findIndex((s) => s.end > time));
    const state = {
      buffer,
      done: false,
      seek(time) {
        next = segmentAt(time);
        state.done = false;
      },
      async pump() {
        if (busy) return;
        busy = true;
        try {
          if (!initialized) {
            await append(playlist.init);
            initialized = true;
          }
          if (!started) return;
          const now = video.currentTime;
          const ranges = buffer.buffered;
          if (ranges.length && ranges.start(0) < now - BEHIND) await remove(0, now - BEHIND);
          // Far ahead (left there by a seek back): let go, and fetch it again when the playhead comes near.
          const far = now + 2 * AHEAD;
          if (buffer.buffered.length && buffer.buffered.end(buffer.buffered.length - 1) > far + 1 && far < source.duration) {
            await remove(far, source.duration);
            next = Math.min(next, segmentAt(far));
          }
          while (next < playlist.segments.length && playlist.segments[next].start < video.currentTime + AHEAD && !signal.aborted) {
            const index = next;
            await append(playlist.segments[index].url);
            // A seek meanwhile has said where to go on from.
            if (next === index) next = index + 1;
          }
          state.done = next >= playlist.segments.length;
        } finally {
          busy = false;
        }
      },
    };
    return state;
  }

  return () => {
    controller.abort();
    clearTimeout(retry);
    URL.revokeObjectURL(objectURL);
  };
}
