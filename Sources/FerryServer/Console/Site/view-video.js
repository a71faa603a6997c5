// One video: the player (HLS, natively or through Media Source Extensions, from the moment its first stream plays;
// else the MP4 rendition) with a timeline that previews the storyboard's tiles on hover, renditions, cover and
// snapshots, editable details, play URLs to copy, and deletion. While the video is processed the page follows its
// status and keeps the player it has, so a first stream plays on while the ladder is made.

import { media } from './api.js';
import { h, replace, bytes, duration, time, copy, toast, confirmDialog, ownImage } from './dom.js';
import { statusText } from './view-library.js';
import { storyboardTimeline } from './storyboard.js';
import { attachStream, readMaster } from './stream-player.js';

export function videoPage(main, videoId) {
  let timer = null;
  let closed = false;
  // The page once built: its parts, what its player plays (`key`) and how to stop it, and the video as last read.
  // A poll refreshes the details and lists; the player and the form are made again only when what plays changes.
  let page = null;
  replace(main, h('p', { class: 'note' }, 'Loading…'));

  async function load() {
    let info;
    let play = null;
    let subtitles = [];
    try {
      info = (await media('GetVideoInfo', { VideoId: videoId })).Video;
      if (info.Status === 'Normal' || info.Playable) {
        try {
          play = await media('GetPlayInfo', { VideoId: videoId });
          subtitles = (await media('ListSubtitles', { VideoId: videoId })).Subtitles;
        } catch (error) {
          // Shown without a player the first time; later, the player there is kept.
          if (page) throw error;
          play = null;
          subtitles = [];
        }
      }
    } catch (error) {
      if (closed) return;
      if (!page) {
        replace(main, h('h1', {}, 'Video'), h('p', { class: 'error', role: 'alert' }, error.message),
          h('a', { href: '#/library' }, 'Back to the library'));
        return;
      }
      // A failed poll leaves the page and its player as they are; the next one tries again.
      page.refresh.textContent = `Could not refresh: ${error.message}; trying again.`;
      timer = setTimeout(load, 4000);
      return;
    }
    if (closed) return;
    const streams = play?.PlayInfoList || [];
    // What plays: a poll that finds the same streams, subtitles and policy leaves the player playing.
    const key = [info.Status === 'Normal', info.PlaybackPolicy, streams.map((s) => `${s.Definition}/${s.Format}`).join(','),
      subtitles.map((s) => s.SubtitleId).join(',')].join('|');
    const choice = page?.key === key ? null : await chooseStream(streams, subtitles);
    if (closed) return;
    render(info, play, subtitles, key, choice);
    if (!['Normal', 'TranscodeFail', 'UploadFail'].includes(info.Status)) timer = setTimeout(load, 2000);
  }

  /** The page's frame, made once: title, player, lists, details, the form and the actions. */
  function build(info) {
    const title = h('h1', { id: 'video-title' });
    const playerBox = h('div', { class: 'player-box' });
    const problem = h('p', { class: 'error', role: 'alert', id: 'player-problem', hidden: true });
    const lists = h('div', {});
    const refresh = h('p', { class: 'note', role: 'status', id: 'refresh-note' });
    const details = h('div', {});
    page = { key: null, info, title, playerBox, problem, lists, refresh, details, stop: () => {} };
    replace(main,
      h('p', {}, h('a', { href: '#/library' }, '← Library')),
      title,
      h('div', { class: 'columns' },
        h('section', { 'aria-label': 'Player' }, playerBox, problem, lists),
        h('section', { 'aria-label': 'Details' }, refresh, details, editForm(info),
          h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'danger', id: 'delete-video', onclick: () => remove(page.info) }, 'Delete video')))));
  }

  function render(info, play, subtitles, key, choice) {
    if (!page) build(info);
    page.info = info;
    page.refresh.textContent = '';
    const streams = play?.PlayInfoList || [];
    const renditions = h('div', { class: 'table-wrap' }, h('table', { id: 'renditions' },
      h('caption', { class: 'visually-hidden' }, 'Renditions'),
      h('thead', {}, h('tr', {}, ['Definition', 'Format', 'Resolution', 'Bitrate', 'Size'].map((name) => h('th', { scope: 'col' }, name)))),
      h('tbody', {}, streams.map((s) => h('tr', {},
        h('td', {}, s.Definition), h('td', {}, s.Format),
        h('td', {}, s.Width && s.Height ? `${s.Width}×${s.Height}` : '—'),
        h('td', {}, s.Bitrate ? `${s.Bitrate} kbit/s` : '—'), h('td', {}, bytes(s.Size)))))));
    const urls = h('ul', { id: 'play-urls' }, streams.map((s) => h('li', {},
      h('span', {}, `${s.Definition} ${s.Format}: `),
      h('button', { type: 'button', 'aria-label': `Copy the ${s.Definition} ${s.Format} URL`, onclick: () => copy(s.PlayURL) }, 'Copy'),
      h('div', { class: 'url' }, s.PlayURL))));
    const snapshots = h('div', { class: 'thumbs' },
      (info.Snapshots || []).map((url, index) => h('img', { src: url, alt: `Snapshot ${index + 1}` })));
    replace(page.title, info.Title);
    replace(page.lists,
      h('h2', {}, 'Renditions'), streams.length ? renditions : h('p', { class: 'note' }, 'None yet.'),
      h('h2', {}, 'Play URLs'), streams.length ? urls : h('p', { class: 'note' }, 'None yet.'));
    replace(page.details, detailsOf(info, snapshots));
    if (page.key === key) return;

    // Another stream (the ladder after the first stream): the new player goes on at the same moment.
    const old = page.playerBox.querySelector('video');
    const resume = old ? { time: old.currentTime, playing: !old.paused, muted: old.muted } : null;
    page.stop();
    const player = playerFor(choice, info, subtitles);
    if (resume && player.tagName === 'VIDEO' && resume.time > 0) {
      player.muted = resume.muted;
      player.addEventListener('loadedmetadata', () => {
        player.currentTime = resume.time;
        if (resume.playing) player.play().catch(() => {});
      }, { once: true });
    }
    const storyboard = play?.VideoBase?.StoryboardURL && player.tagName === 'VIDEO'
      ? storyboardTimeline(player, play.VideoBase.StoryboardURL, play.VideoBase.Duration) : null;
    replace(page.playerBox, player, storyboard);
    const problem = page.problem;
    problem.hidden = true;
    page.stop = choice?.tracks && player.tagName === 'VIDEO'
      ? attachStream(player, choice.stream.PlayURL, choice.tracks, (message) => {
        problem.hidden = !message;
        problem.textContent = message || '';
      })
      : () => {};
    page.key = key;
  }

  function detailsOf(info, snapshots) {
    return [
      h('p', {}, h('span', { class: `status status-${info.Status}`, id: 'video-status' }, statusText(info))),
      info.StatusMessage ? h('p', { class: 'note' }, info.StatusMessage) : null,
      info.ErrorMessage ? h('p', { class: 'error' }, info.ErrorMessage) : null,
      h('p', { class: 'meta' }, [`Duration ${duration(info.Duration)}`, `Size ${bytes(info.Size)}`,
        `Created ${time(info.CreationTime)}`, info.Width ? `${info.Width}×${info.Height}` : null].filter(Boolean).join(' · ')),
      h('h2', {}, 'Cover'),
      coverOf(info),
      (info.Snapshots || []).length ? [h('h2', {}, 'Snapshots'), snapshots] : null];
  }

  /** The cover: shown when it is the service's own; a URL the app set elsewhere is a link (the console loads
   * nothing from other sites). */
  function coverOf(info) {
    if (!info.CoverURL) return h('p', { class: 'note' }, 'No cover yet.');
    if (ownImage(info.CoverURL)) return h('img', { src: info.CoverURL, alt: 'Cover', class: 'player', id: 'cover' });
    const link = /^https?:\/\//i.test(info.CoverURL)
      ? h('a', { href: info.CoverURL, target: '_blank', rel: 'noopener noreferrer' }, info.CoverURL) : info.CoverURL;
    return h('p', { class: 'note', id: 'cover' }, 'The cover is elsewhere: ', link);
  }

  function editForm(info) {
    const field = (id, label, value, attributes = {}) => h('div', { class: 'form-row' },
      h('label', { for: id }, label), h(attributes.multiline ? 'textarea' : 'input', { id, value: value ?? '', ...attributes.input }));
    const form = h('form', { id: 'edit-video', 'aria-labelledby': 'edit-title' },
      h('h2', { id: 'edit-title' }, 'Details'),
      field('edit-video-title', 'Title', info.Title, { input: { required: true, maxlength: '128' } }),
      field('edit-description', 'Description', info.Description, { multiline: true, input: { rows: '3', maxlength: '1024' } }),
      field('edit-tags', 'Tags (comma-separated)', info.Tags),
      field('edit-category', 'Category', info.CateId, { input: { type: 'number', min: '0' } }),
      field('edit-cover', 'Cover URL (empty: the cover taken from the video)', info.CoverURL && !info.CoverURL.includes('/_ferry/play/') ? info.CoverURL : '', { input: { type: 'url' } }),
      h('div', { class: 'form-row' },
        h('label', { for: 'edit-playback' }, 'Playback (signed: play URLs need a token)'),
        h('select', { id: 'edit-playback' },
          ['signed', 'public'].map((policy) => h('option', { value: policy, selected: (info.PlaybackPolicy || 'signed') === policy }, policy)))),
      h('p', { class: 'error', role: 'alert', id: 'edit-error' }),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'save-video' }, 'Save')));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const input = {
        VideoId: videoId, Title: form.querySelector('#edit-video-title').value, Description: form.querySelector('#edit-description').value,
        Tags: form.querySelector('#edit-tags').value.split(',').map((t) => t.trim()).filter(Boolean).join(','),
        CoverURL: form.querySelector('#edit-cover').value.trim(),
        PlaybackPolicy: form.querySelector('#edit-playback').value,
      };
      const category = form.querySelector('#edit-category').value.trim();
      if (category !== '') input.CateId = Number(category);
      try {
        await media('UpdateVideoInfo', input);
        toast('Saved');
        clearTimeout(timer);
        load();
      } catch (error) {
        form.querySelector('#edit-error').textContent = error.message;
      }
    });
    return form;
  }

  async function remove(info) {
    if (!(await confirmDialog(`Delete “${info.Title}” and all its renditions? This cannot be undone.`))) return;
    try {
      await media('DeleteVideo', { VideoIds: videoId });
      toast('Deleted');
      location.hash = '#/library';
    } catch (error) {
      toast(`Not deleted: ${error.message}`);
    }
  }

  load();
  return () => { closed = true; clearTimeout(timer); page?.stop(); };
}

/** The stream to play, or null: the HLS master where the browser plays HLS itself (unless subtitles want the MP4's
 * tracks), else the HLS master through Media Source Extensions (`tracks`: the media playlists and their codecs) when
 * its codecs play here, else the best MP4, else the best HLS playlist as it is. */
async function chooseStream(streams, subtitles) {
  if (!streams.length) return null;
  const probe = document.createElement('video');
  const byBitrate = (a, b) => (b.Bitrate || 0) - (a.Bitrate || 0);
  // The master (AUTO) first: a variant alone may carry the picture without the sound.
  const hls = streams.filter((s) => s.Format === 'm3u8').sort((a, b) => (b.Definition === 'AUTO') - (a.Definition === 'AUTO') || byBitrate(a, b));
  // Progressive files a video element plays: MP4, else the sound alone (M4A); never the DASH manifest.
  const files = [...streams.filter((s) => s.Format === 'mp4').sort(byBitrate), ...streams.filter((s) => s.Format === 'm4a')];
  const nativeHLS = probe.canPlayType('application/vnd.apple.mpegurl') !== '';
  if (nativeHLS && hls.length && !(subtitles.length && files.length)) return { stream: hls[0] };
  const master = hls.find((s) => s.Definition === 'AUTO');
  if (master && !nativeHLS) {
    try {
      const tracks = await readMaster(master.PlayURL);
      if (tracks) return { stream: master, tracks };
    } catch (error) {
      console.warn('stream:', error.message);
    }
  }
  if (files.length) return { stream: files[0] };
  return hls.length ? { stream: hls[0] } : null;
}

/** A video element for the chosen stream, or a note. Subtitles are `<track>` elements, which every browser shows
 * the same way, except on HLS played natively (its playlists carry them). */
function playerFor(choice, info, subtitles) {
  if (!choice) {
    return h('p', { class: 'note', id: 'player-note' },
      info.Status === 'TranscodeFail' ? 'The video could not be processed.'
        : info.Status === 'UploadFail' ? 'The video\'s upload did not finish in time; it will not play.'
          : 'The video becomes playable when processing ends.');
  }
  const chosen = choice.stream;
  const tracks = chosen.Format === 'm3u8' && !choice.tracks ? [] : subtitles.map((track) => h('track', {
    kind: 'subtitles', src: besidePlayURL(chosen.PlayURL, `subtitles/${track.SubtitleId}.vtt`), srclang: track.Language,
    label: track.Name, default: track.Default || null,
  }));
  return h('video', {
    class: 'player', id: 'player', controls: true, preload: 'metadata', src: choice.tracks ? null : chosen.PlayURL, playsinline: true,
    poster: ownImage(info.CoverURL), 'aria-label': `Player: ${info.Title}`,
    dataset: { format: chosen.Format, definition: chosen.Definition, engine: choice.tracks ? 'mse' : 'native' },
  }, tracks);
}

/** The URL of another file of the video: the play URL with its last path segment replaced (its query kept). */
function besidePlayURL(playURL, path) {
  const url = new URL(playURL, location.href);
  url.pathname = url.pathname.replace(/[^/]*$/, path);
  return url.toString();
}
