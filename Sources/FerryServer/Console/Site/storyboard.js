// Scrub previews: a timeline under the player that shows, where the pointer is, the storyboard tile of that moment
// (GetPlayInfo's StoryboardURL: a WebVTT file whose cues name tiles of a sprite as `storyboard.jpg#xywh=x,y,w,h`).

import { h, duration as clock } from './dom.js';

/** Reads a storyboard's WebVTT text: cues { start, end, url, x, y, w, h } with the sprite's URL made absolute. */
export function parseStoryboard(text, base) {
  const seconds = (stamp) => {
    const parts = stamp.trim().split(':').map(Number);
    return parts.reduce((total, part) => total * 60 + part, 0);
  };
  const cues = [];
  const lines = text.replace(/\r/g, '').split('\n');
  for (let index = 0; index < lines.length; index += 1) {
    const timing = lines[index].split('-->');
    if (timing.length !== 2) continue;
    const target = (lines[index + 1] || '').trim();
    const hash = target.indexOf('#xywh=');
    if (hash < 0) continue;
    const [x, y, w, hgt] = target.slice(hash + 6).split(',').map(Number);
    if ([x, y, w, hgt].some((n) => !Number.isFinite(n))) continue;
    // The sprite beside the VTT (a signed video's cues name it with their playback token).
    const sprite = new URL(target.slice(0, hash), base);
    cues.push({ start: seconds(timing[0]), end: seconds(timing[1]), url: sprite.href, x, y, w, h: hgt });
  }
  return cues;
}

/** A timeline for `player` with storyboard previews on hover; clicking or the arrow keys seek. */
export function storyboardTimeline(player, storyboardURL, totalSeconds) {
  const tile = h('div', { class: 'scrub-tile', id: 'scrub-tile' });
  const label = h('span', { class: 'scrub-time', id: 'scrub-time' });
  const preview = h('div', { class: 'scrub-preview', id: 'scrub-preview', hidden: true }, tile, label);
  const played = h('div', { class: 'scrub-played' });
  const bar = h('div', {
    class: 'scrub-bar', id: 'scrub-bar', role: 'slider', tabindex: '0', 'aria-label': 'Seek (hover for previews)',
    'aria-valuemin': '0', 'aria-valuemax': String(Math.round(totalSeconds || 0)), 'aria-valuenow': '0',
  }, played, preview);
  let cues = [];
  fetch(storyboardURL).then((answer) => (answer.ok ? answer.text() : '')).then((text) => {
    cues = parseStoryboard(text, storyboardURL);
    bar.dataset.cues = String(cues.length);
  }).catch(() => { cues = []; });

  const length = () => (Number.isFinite(player.duration) && player.duration > 0 ? player.duration : totalSeconds || 0);
  const at = (event) => {
    const box = bar.getBoundingClientRect();
    return Math.min(Math.max((event.clientX - box.left) / box.width, 0), 1) * length();
  };
  bar.addEventListener('pointermove', (event) => {
    const time = at(event);
    const cue = cues.find((c) => time >= c.start && time < c.end) || cues[cues.length - 1];
    if (!cue) return;
    tile.style.width = `${cue.w}px`;
    tile.style.height = `${cue.h}px`;
    tile.style.backgroundImage = `url("${cue.url}")`;
    tile.style.backgroundPosition = `-${cue.x}px -${cue.y}px`;
    label.textContent = clock(time);
    const box = bar.getBoundingClientRect();
    const left = Math.min(Math.max(event.clientX - box.left - cue.w / 2, 0), Math.max(box.width - cue.w, 0));
    preview.style.left = `${left}px`;
    preview.hidden = false;
    preview.dataset.start = String(cue.start);
  });
  bar.addEventListener('pointerleave', () => { preview.hidden = true; });
  bar.addEventListener('click', (event) => { player.currentTime = at(event); });
  bar.addEventListener('keydown', (event) => {
    const step = event.key === 'ArrowRight' ? 5 : event.key === 'ArrowLeft' ? -5 : 0;
    if (!step) return;
    event.preventDefault();
    player.currentTime = Math.min(Math.max(player.currentTime + step, 0), length());
  });
  player.addEventListener('timeupdate', () => {
    played.style.width = `${length() ? (player.currentTime / length()) * 100 : 0}%`;
    bar.setAttribute('aria-valuenow', String(Math.round(player.currentTime)));
  });
  return bar;
}
