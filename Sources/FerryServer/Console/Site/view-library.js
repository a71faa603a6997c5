// The media library: covers, titles, durations, statuses, sizes and times; filters by status, category and tag; title
// search; paging; statuses that change on their own while videos upload and process.

import { media } from './api.js';
import { h, replace, bytes, duration, time, ownImage } from './dom.js';

const PAGE_SIZE = 12;
const STATUSES = ['Uploading', 'UploadSucc', 'Transcoding', 'Normal', 'TranscodeFail', 'UploadFail'];
/** Statuses that do not change by themselves. */
const SETTLED = ['Normal', 'TranscodeFail', 'UploadFail'];
const PLACEHOLDERS = { Uploading: 'Uploading', UploadSucc: 'Processing', Transcoding: 'Processing' };
const state = { page: 1, status: '', cateId: '', tag: '', title: '' };

/** Back to the first page, without filters (another key signed in). */
export function resetLibrary() { Object.assign(state, { page: 1, status: '', cateId: '', tag: '', title: '' }); }

export function libraryPage(main) {
  const list = h('ul', { class: 'grid', id: 'video-list', 'aria-live': 'polite' });
  const summary = h('p', { class: 'note', id: 'library-summary' });
  const pager = h('div', { class: 'pager' });
  const search = h('input', { id: 'filter-title', type: 'search', value: state.title, placeholder: 'Part of a title' });
  const status = h('select', { id: 'filter-status' }, h('option', { value: '' }, 'Any'),
    STATUSES.map((s) => h('option', { value: s, selected: s === state.status }, s)));
  const category = h('input', { id: 'filter-category', type: 'number', min: '0', inputmode: 'numeric', value: state.cateId });
  const tag = h('input', { id: 'filter-tag', value: state.tag });
  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter videos' },
    h('div', { class: 'field' }, h('label', { for: 'filter-title' }, 'Title'), search),
    h('div', { class: 'field' }, h('label', { for: 'filter-status' }, 'Status'), status),
    h('div', { class: 'field' }, h('label', { for: 'filter-category' }, 'Category'), category),
    h('div', { class: 'field' }, h('label', { for: 'filter-tag' }, 'Tag'), tag),
    h('button', { type: 'submit', class: 'primary' }, 'Search'));
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    Object.assign(state, { page: 1, title: search.value.trim(), status: status.value, cateId: category.value.trim(), tag: tag.value.trim() });
    load();
  });
  replace(main, h('h1', {}, 'Media library'), filters, summary, list, pager);

  let timer = null;
  let generation = 0;
  async function load() {
    const mine = ++generation;
    clearTimeout(timer);
    const input = { PageNo: state.page, PageSize: PAGE_SIZE };
    if (state.status) input.Status = state.status;
    if (state.title) input.Title = state.title;
    if (state.tag) input.Tag = state.tag;
    if (state.cateId !== '' && Number.isInteger(Number(state.cateId))) input.CateId = Number(state.cateId);
    try {
      const answer = await media('ListVideos', input);
      if (mine !== generation) return;
      if (!render(answer)) return;
      // Statuses change while videos upload and process: look again, more often while any is moving.
      const moving = answer.VideoList.some((v) => !SETTLED.includes(v.Status));
      timer = setTimeout(load, moving ? 2000 : 10000);
    } catch (error) {
      if (mine !== generation) return;
      summary.textContent = `The library could not be loaded: ${error.message}`;
      if (error.status !== 401) timer = setTimeout(load, 5000);
    }
  }

  /** Shows `answer`; false when it asked for another page instead (past the last one: videos deleted meanwhile). */
  function render(answer) {
    const pages = Math.max(1, Math.ceil(answer.Total / PAGE_SIZE));
    if (state.page > pages) { state.page = pages; load(); return false; }
    summary.textContent = answer.Total === 0 ? 'No videos match.' : `${answer.Total} video${answer.Total === 1 ? '' : 's'}`;
    const existing = new Map([...list.children].map((item) => [item.dataset.videoId, item]));
    const items = answer.VideoList.map((video) => {
      const item = card(video);
      const old = existing.get(video.VideoId);
      // Keep the cover element (and its loaded image) when only the text changed.
      if (old && old.dataset.cover === item.dataset.cover) {
        replace(old.querySelector('.body'), ...item.querySelector('.body').childNodes);
        old.dataset.status = video.Status;
        return old;
      }
      return item;
    });
    list.replaceChildren(...items);
    replace(pager,
      h('button', { type: 'button', disabled: state.page <= 1, onclick: () => { state.page -= 1; load(); } }, 'Previous'),
      h('span', { id: 'page-label' }, `Page ${state.page} of ${pages}`),
      h('button', { type: 'button', disabled: state.page >= pages, onclick: () => { state.page += 1; load(); } }, 'Next'));
    return true;
  }

  load();
  return () => { generation += 1; clearTimeout(timer); };
}

function card(video) {
  // A cover elsewhere (a URL the app set) is not loaded here: the page says where it is.
  const image = ownImage(video.CoverURL);
  const cover = image
    ? h('img', { src: image, alt: '', loading: 'lazy' })
    : h('span', { class: 'cover-placeholder' }, video.CoverURL ? 'Cover elsewhere' : PLACEHOLDERS[video.Status] || 'No cover');
  const link = `#/videos/${video.VideoId}`;
  const details = [duration(video.Duration), bytes(video.Size), time(video.CreationTime)];
  return h('li', { class: 'video-card', dataset: { videoId: video.VideoId, status: video.Status, cover: video.CoverURL ? 'yes' : 'no' } },
    h('a', { class: 'cover', href: link, tabindex: '-1', 'aria-hidden': 'true' }, cover),
    h('div', { class: 'body' },
      h('a', { class: 'title', href: link }, video.Title),
      h('span', { class: `status status-${video.Status}` }, statusText(video)),
      h('span', { class: 'meta' }, details.join(' · '))));
}

export function statusText(video) {
  if (video.Status === 'Transcoding' && Number.isFinite(video.ProcessingProgress)) return `Transcoding ${video.ProcessingProgress}%`;
  return video.Status;
}
