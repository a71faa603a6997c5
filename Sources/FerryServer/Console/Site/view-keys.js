// Access keys (root only): create one with a policy built from choices, see its secret once, list and disable keys.

import { media } from './api.js';
import { h, replace, time, copy, confirmDialog, toast } from './dom.js';

const GRANTS = [
  { id: 'grant-media-upload', label: 'Upload videos and images (media API)', actions: ['media:CreateUploadVideo', 'media:RefreshUploadVideo', 'media:CreateUploadImage', 'media:RefreshUploadImage'] },
  { id: 'grant-media-read', label: 'See videos and play them (media API)', actions: ['media:GetVideoInfo', 'media:ListVideos', 'media:GetPlayInfo', 'media:GetMezzanineInfo', 'media:GetImageInfo'] },
  { id: 'grant-media-manage', label: 'Edit and delete videos and images (media API)', actions: ['media:UpdateVideoInfo', 'media:DeleteVideo', 'media:DeleteImage'] },
  { id: 'grant-sts', label: 'Issue temporary credentials (AssumeRole)', actions: ['media:AssumeRole'] },
  { id: 'grant-s3-read', label: 'Read objects (object API)', actions: ['s3:GetObject', 's3:ListBucket', 's3:ListAllMyBuckets'] },
  { id: 'grant-s3-write', label: 'Write and delete objects (object API)', actions: ['s3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload', 's3:ListMultipartUploadParts'] },
];

export function keysPage(main, session) {
  if (!session?.Root) {
    replace(main, h('h1', {}, 'Access keys'), h('p', { class: 'note' }, 'Only the root key manages access keys.'));
    return null;
  }
  const list = h('div', { class: 'table-wrap', id: 'key-list' });
  const created = h('div', { id: 'new-key', 'aria-live': 'polite' });
  const form = h('form', { id: 'create-key', class: 'card', 'aria-labelledby': 'create-key-title' },
    h('h2', { id: 'create-key-title' }, 'New access key'),
    h('label', { for: 'key-description' }, 'Description'),
    h('input', { id: 'key-description', maxlength: '256' }),
    h('fieldset', {}, h('legend', {}, 'It may'),
      GRANTS.map((grant) => h('div', {}, h('input', { type: 'checkbox', id: grant.id, checked: grant.id.startsWith('grant-media') && grant.id !== 'grant-media-manage' }),
        ' ', h('label', { for: grant.id, class: 'inline' }, grant.label)))),
    h('label', { for: 'key-bucket' }, 'Only in bucket (empty: every bucket)'),
    h('input', { id: 'key-bucket', spellcheck: 'false' }),
    h('label', { for: 'key-prefix' }, 'Only under key prefix (empty: every key)'),
    h('input', { id: 'key-prefix', spellcheck: 'false' }),
    h('p', { class: 'error', role: 'alert', id: 'key-error' }),
    h('button', { type: 'submit', class: 'primary' }, 'Create key'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const actions = GRANTS.filter((g) => form.querySelector(`#${g.id}`).checked).flatMap((g) => g.actions);
    const error = form.querySelector('#key-error');
    if (!actions.length) { error.textContent = 'Choose at least one thing the key may do.'; return; }
    const statement = { actions, bucket: form.querySelector('#key-bucket').value.trim() || '*', keyPrefix: form.querySelector('#key-prefix').value.trim() };
    try {
      const answer = await media('CreateAccessKey', { Description: form.querySelector('#key-description').value, Policy: { statements: [statement] } });
      error.textContent = '';
      const key = answer.AccessKey;
      // The secret is shown here once and kept nowhere: the list never shows it again.
      replace(created, h('div', { class: 'card' },
        h('h2', {}, 'Key created'),
        h('p', {}, 'Copy the secret now: it is not shown again.'),
        h('p', {}, 'Access key id: ', h('span', { class: 'url', id: 'new-key-id' }, key.AccessKeyId)),
        h('p', { class: 'secret', id: 'new-key-secret' }, key.AccessKeySecret),
        h('div', { class: 'actions' },
          h('button', { type: 'button', onclick: () => copy(key.AccessKeySecret) }, 'Copy secret'),
          h('button', { type: 'button', onclick: () => created.replaceChildren() }, 'Done'))));
      load();
    } catch (failure) {
      error.textContent = failure.message;
    }
  });
  replace(main, h('h1', {}, 'Access keys'), created, list, form);

  async function load() {
    try {
      const answer = await media('ListAccessKeys');
      replace(list, h('table', {},
        h('caption', { class: 'visually-hidden' }, 'Access keys'),
        h('thead', {}, h('tr', {}, ['Access key id', 'Description', 'Status', 'Created', 'Allows', 'Usage', ''].map((n) => h('th', { scope: 'col' }, n)))),
        h('tbody', {}, answer.AccessKeys.map((key) => h('tr', { dataset: { keyId: key.AccessKeyId } },
          h('td', { class: 'url' }, key.AccessKeyId), h('td', {}, key.Description || '—'), h('td', {}, key.Status),
          h('td', {}, time(key.CreationTime)),
          h('td', { class: 'meta' }, (key.Policy?.statements || []).map((s) => `${s.actions.join(', ')} on ${s.bucket}${s.keyPrefix ? `/${s.keyPrefix}*` : ''}`).join('; ')),
          h('td', { class: 'meta usage', dataset: { usageOf: key.AccessKeyId } }, '…'),
          h('td', {}, key.Status === 'active'
            ? h('button', { type: 'button', class: 'danger', 'aria-label': `Disable ${key.AccessKeyId}`, onclick: () => disable(key.AccessKeyId) }, 'Disable')
            : null))))));
      if (!answer.AccessKeys.length) list.append(h('p', { class: 'note' }, 'No access keys besides the root key.'));
      for (const key of answer.AccessKeys) showUsage(key.AccessKeyId);
    } catch (error) {
      replace(list, h('p', { class: 'error' }, error.message));
    }
  }

  // What a key holds against its quota (GetUsage), in its row.
  async function showUsage(id) {
    const cell = list.querySelector(`td[data-usage-of="${CSS.escape(id)}"]`);
    if (!cell) return;
    try {
      const { Usage: usage, Quota: quota = {} } = await media('GetUsage', { AccessKeyId: id });
      const limit = (value, max, unit) => `${value}${max === undefined ? '' : ` of ${max}`}${unit}`;
      cell.textContent = [
        limit(usage.StorageBytes, quota.StorageBytes, ' bytes'),
        limit(usage.Videos, quota.Videos, ' videos'),
        limit(usage.UploadsInProgress, quota.ConcurrentUploads, ' uploads in progress'),
        quota.RequestsPerSecond === undefined ? null : `${quota.RequestsPerSecond} requests/s`,
      ].filter(Boolean).join(' · ');
    } catch (error) {
      cell.textContent = error.message;
    }
  }

  async function disable(id) {
    if (!(await confirmDialog(`Disable ${id}? Its temporary credentials and console sessions stop working at once.`, 'Disable'))) return;
    try {
      await media('DisableAccessKey', { AccessKeyId: id });
      toast('Disabled');
      load();
    } catch (error) {
      toast(error.message);
    }
  }

  load();
  return null;
}
