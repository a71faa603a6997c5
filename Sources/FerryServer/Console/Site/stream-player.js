// Plays Ferry's HLS (fMP4 segments, VOD playlists) in a browser that does not play HLS itself, through Media Source
// Extensions: the master playlist's best variant, and its AUDIO rendition when the sound is apart (the ladder) or the
// variant's own sound (a first stream). Segments are fetched a little ahead of the playhead, and again from where a
// seek lands; what lies far behind is let go, so a long video holds a bounded amount of memory.

const AHEAD = 30; // seconds buffered ahead of the playhead
const BEHIND = 30; // seconds kept behind it

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

async function text(url, signal) {
  const response = await fetch(url, { signal, credentials: 'omit' });
  if (!response.ok) throw new Error(`${response.status} for a playlist`);
  return response.text();
}

/** The variant to play and its sound: the highest bandwidth whose codecs play here; null when none does. */
export async function readMaster(url, signal) {
  const lines = (await text(url, signal)).split(/\r?\n/);
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
  const lines = (await text(url, signal)).split(/\r?\n/);
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
  if (!init || !segments.length) throw new Error('The playlist names no segments.');
  return { init, segments, duration: start };
}

/** Plays the HLS master at `url` in `video`; returns a function that stops it (fetches end, the source goes). */
export function attachStream(video, url, tracks) {
  const controller = new AbortController();
  const { signal } = controller;
  const source = new MediaSource();
  video.src = URL.createObjectURL(source);
  source.addEventListener('sourceopen', async () => {
    try {
      const playlists = await Promise.all(tracks.map((track) => readMedia(track.url, signal)));
      source.duration = Math.max(...playlists.map((p) => p.duration));
      const feeds = playlists.map((playlist, index) => feed(source.addSourceBuffer(
        `${tracks[index].codecs.every((c) => c.startsWith('mp4a')) ? 'audio' : 'video'}/mp4; codecs="${tracks[index].codecs.join(',')}"`),
      playlist));
      await Promise.all(feeds.map((f) => f.ready));
      const pump = () => Promise.all(feeds.map((f) => f.pump())).then(() => {
        if (feeds.every((f) => f.done) && source.readyState === 'open' && feeds.every((f) => !f.buffer.updating)) source.endOfStream();
      }).catch((error) => { if (!signal.aborted) console.warn('stream:', error.message); });
      video.addEventListener('timeupdate', pump, { signal });
      video.addEventListener('seeking', () => { feeds.forEach((f) => f.seek(video.currentTime)); pump(); }, { signal });
      pump();
    } catch (error) {
      if (!signal.aborted) console.warn('stream:', error.message);
    }
  }, { once: true });

  /** One SourceBuffer and the segments it is fed, one fetch and append at a time. */
  function feed(buffer, playlist) {
    let next = 0;
    let busy = false;
    const appended = () => new Promise((resolve, reject) => {
      buffer.addEventListener('updateend', resolve, { once: true });
      buffer.addEventListener('error', () => reject(new Error('The browser could not read a segment.')), { once: true });
    });
    const append = async (url) => {
      const response = await fetch(url, { signal, credentials: 'omit' });
      if (!response.ok) throw new Error(`${response.status} for a segment`);
      const bytes = await response.arrayBuffer();
      const done = appended();
      buffer.appendBuffer(bytes);
      await done;
    };
    const state = {
      buffer,
      done: false,
      ready: append(playlist.init),
      seek(time) {
        next = Math.max(0, playlist.segments.findIndex((s) => s.end > time));
        state.done = false;
      },
      async pump() {
        if (busy) return;
        busy = true;
        try {
          const now = video.currentTime;
          if (now > BEHIND && buffer.buffered.length && buffer.buffered.start(0) < now - BEHIND) {
            const done = appended();
            buffer.remove(0, now - BEHIND);
            await done;
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
    URL.revokeObjectURL(video.src);
  };
}
