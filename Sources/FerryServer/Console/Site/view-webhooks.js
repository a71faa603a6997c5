// Webhook deliveries (root only): the newest events, whether each was delivered, is being retried or failed, with
// the last error, and a way to send a failed one again.

import { media } from './api.js';
import { h, replace, time, toast } from './dom.js';

export function webhooksPage(main, session) {
  if (!session?.Root) {
    replace(main, h('h1', {}, 'Webhooks'), h('p', { class: 'note' }, 'Only the root key sees webhook deliveries.'));
    return null;
  }
  const target = h('p', { class: 'note', id: 'webhook-target' });
  const list = h('div', { class: 'table-wrap', id: 'webhook-list' });
  replace(main, h('h1', {}, 'Webhooks'), target, list);
  let timer = null;

  async function load() {
    clearTimeout(timer);
    try {
      const answer = await media('ListWebhookEvents', { Limit: 50 });
      target.textContent = answer.WebhookURL
        ? `Events are delivered to ${answer.WebhookURL}.`
        : 'No webhook is configured (ferry serve --webhook-url); events are not recorded.';
      replace(list, h('table', {},
        h('caption', { class: 'visually-hidden' }, 'Recent webhook events'),
        h('thead', {}, h('tr', {}, ['Event', 'Type', 'Video', 'Created', 'State', 'Attempts', 'Last error', ''].map((n) => h('th', { scope: 'col' }, n)))),
        h('tbody', {}, answer.Events.map((event) => h('tr', { dataset: { eventId: event.EventId, state: event.State } },
          h('td', { class: 'url' }, event.EventId), h('td', {}, event.EventType),
          h('td', {}, event.VideoId ? h('a', { href: `#/videos/${event.VideoId}` }, event.VideoId) : '—'),
          h('td', {}, time(event.CreationTime)), h('td', {}, event.State), h('td', {}, String(event.Attempts)),
          h('td', { class: 'meta' }, event.LastError || '—'),
          h('td', {}, event.State === 'Failed'
            ? h('button', { type: 'button', 'aria-label': `Retry ${event.EventId}`, onclick: () => retry(event.EventId) }, 'Retry')
            : null))))));
      if (!answer.Events.length) list.append(h('p', { class: 'note' }, 'No events yet.'));
    } catch (error) {
      replace(list, h('p', { class: 'error' }, error.message));
    }
    timer = setTimeout(load, 5000);
  }

  async function retry(id) {
    try {
      await media('RetryWebhookEvent', { EventId: id });
      toast('Delivery will be tried again');
      load();
    } catch (error) {
      toast(error.message);
    }
  }

  load();
  return () => clearTimeout(timer);
}
