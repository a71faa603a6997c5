// Upload from the browser: drop or pick files; each shows its progress, speed and time left, with pause, resume and
// cancel, then the video's processing status.

import { uploads, unfinished, discard } from './uploads.js';
import { h, replace, bytes, duration } from './dom.js';

const LABELS = {
  queued: 'Queued', creating: 'Starting', uploading: 'Uploading', paused: 'Paused', waiting: 'Waiting for sign-in',
  offline: 'Waiting for the network',
  completing: 'Finishing', processing: 'Processing', done: 'Done', failed: 'Failed', cancelled: 'Cancelled',
};

export function uploadPage(main) {
  const input = h('input', { type: 'file', id: 'file-input', multiple: true, accept: 'video/*,image/*,audio/*', class: 'visually-hidden', tabindex: '-1' });
  const drop = h('div', { class: 'drop', id: 'drop-zone' },
    h('p', {}, 'Drop video or image files here, or'),
    h('button', { type: 'button', class: 'primary', id: 'choose-files', onclick: () => input.click() }, 'Choose files'),
    h('label', { for: 'file-input', class: 'visually-hidden' }, 'Files to upload'),
    input);
  input.addEventListener('change', () => { uploads.add([...input.files]); input.value = ''; });
  drop.addEventListener('dragover', (event) => { event.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (event) => {
    event.preventDefault();
    drop.classList.remove('over');
    uploads.add([...event.dataTransfer.files]);
  });
  const list = h('ul', { class: 'uploads', id: 'upload-list', 'aria-label': 'Uploads' });
  const earlier = h('section', { id: 'unfinished', 'aria-label': 'Unfinished uploads' });
  replace(main, h('h1', {}, 'Upload'), drop, earlier, list);

  function renderEarlier() {
    const running = new Set(uploads.uploads.map((u) => u.uploadId).filter(Boolean));
    const entries = unfinished().filter((e) => !running.has(e.uploadId));
    if (!entries.length) { earlier.replaceChildren(); return; }
    replace(earlier, h('h2', {}, 'Unfinished uploads'),
      h('p', { class: 'note' }, 'Choose the same file again to resume; parts already stored are not sent again.'),
      h('ul', {}, entries.map((entry) => h('li', { dataset: { file: entry.name } },
        `${entry.name} (${bytes(entry.size)}) `,
        h('button', { type: 'button', 'aria-label': `Discard the unfinished upload of ${entry.name}`,
          onclick: async () => { await discard(entry); renderEarlier(); } }, 'Discard')))));
  }

  const rows = new Map();
  function render() {
    for (const upload of uploads.uploads) {
      let row = rows.get(upload.id);
      if (!row) {
        row = h('li', { class: 'upload' });
        rows.set(upload.id, row);
        list.prepend(row);
      }
      update(row, upload);
    }
    renderEarlier();
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }
  uploads.addEventListener('change', schedule);
  render();
  return () => uploads.removeEventListener('change', schedule);
}

function build(row, upload) {
  const name = upload.file.name;
  row.append(
    h('div', { class: 'line' }, h('span', { class: 'name' }, name), h('span', { class: 'state', role: 'status' })),
    h('progress', { max: '100', value: '0', 'aria-label': `Upload of ${name}` }),
    h('div', { class: 'line' }, h('span', { class: 'meta' }),
      h('span', { class: 'actions' },
        h('button', { type: 'button', class: 'pause', onclick: () => upload.pause(), 'aria-label': `Pause ${name}` }, 'Pause'),
        h('button', { type: 'button', class: 'resume', onclick: () => upload.resume(), 'aria-label': `Resume ${name}` }, 'Resume'),
        h('button', { type: 'button', class: 'cancel danger', onclick: () => upload.cancel(), 'aria-label': `Cancel ${name}` }, 'Cancel'),
        h('a', { class: 'open', href: '#/library' }, 'Open video'))));
}

function update(row, upload) {
  if (!row.firstChild) build(row, upload);
  const percent = Math.floor(upload.fraction * 100);
  const speed = upload.speed;
  const eta = upload.eta;
  row.dataset.file = upload.file.name;
  row.dataset.state = upload.state;
  row.dataset.sentParts = String(upload.sentParts);
  row.dataset.skippedParts = String(upload.skippedParts);
  row.dataset.partCount = String(upload.partCount);
  row.dataset.percent = String(percent);
  if (upload.videoId) row.dataset.videoId = upload.videoId;
  if (upload.imageId) row.dataset.imageId = upload.imageId;
  if (upload.status) row.dataset.status = upload.status;
  let status = LABELS[upload.state] || upload.state;
  if (upload.state === 'processing' || (upload.state === 'done' && upload.status)) {
    status = `Video: ${upload.status || 'UploadSucc'}`;
    if (upload.status === 'Transcoding' && Number.isFinite(upload.progress)) status += ` ${upload.progress}%`;
  }
  if (upload.error) status += ` — ${upload.error}`;
  const details = [`${bytes(upload.sentBytes)} of ${bytes(upload.file.size)}`];
  if (upload.state === 'uploading' && speed > 0) details.push(`${bytes(speed)}/s`, eta !== null ? `${duration(eta)} left` : null);
  if (upload.skippedParts > 0) details.push(`resumed: ${upload.skippedParts} of ${upload.partCount} parts were stored already`);
  row.querySelector('.state').textContent = status;
  const progress = row.querySelector('progress');
  progress.value = percent;
  progress.setAttribute('aria-valuetext', `${percent}%`);
  row.querySelector('.meta').textContent = `${percent}% · ${details.filter(Boolean).join(' · ')}`;
  row.querySelector('.pause').hidden = !['uploading', 'creating', 'waiting', 'offline'].includes(upload.state);
  row.querySelector('.resume').hidden = !['paused', 'failed'].includes(upload.state);
  row.querySelector('.cancel').hidden = ['done', 'processing', 'cancelled'].includes(upload.state);
  const open = row.querySelector('.open');
  open.hidden = !(upload.videoId && ['processing', 'done'].includes(upload.state));
  if (upload.videoId) open.setAttribute('href', `#/videos/${upload.videoId}`);
}
