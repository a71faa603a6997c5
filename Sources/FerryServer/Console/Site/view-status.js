// The service's status (root only): every node with its heartbeat (stale when it stopped writing one), the media job
// queue, the webhook backlog, whether the catalog and the object store answer, and the disk space left.

import { media } from './api.js';
import { bytes, h, replace, time } from './dom.js';

function age(seconds) {
  if (seconds === null || seconds === undefined) return '';
  const total = Math.round(Number(seconds));
  if (total < 120) return `${total} s`;
  if (total < 7200) return `${Math.floor(total / 60)} min`;
  return `${Math.floor(total / 3600)} h`;
}

function health(value) {
  const latency = `${Number(value.LatencyMs).toFixed(1)} ms`;
  return value.Healthy ? `Answering (${latency})` : `Not answering after ${latency}: ${value.Error || 'no answer'}`;
}

export function statusPage(main, session) {
  if (!session?.Root) {
    replace(main, h('h1', {}, 'Status'), h('p', { class: 'note' }, 'Only the root key sees the service\'s status.'));
    return null;
  }
  const summary = h('div', { class: 'table-wrap', id: 'status-summary' });
  const nodes = h('div', { class: 'table-wrap', id: 'node-list' });
  replace(main, h('h1', {}, 'Status'), summary, h('h2', {}, 'Nodes'), nodes);
  let timer = null;

  async function load() {
    clearTimeout(timer);
    try {
      const answer = await media('GetServiceStatus');
      const rows = [
        ['Version', `${answer.Version} (answered by ${answer.Node})`],
        ['Catalog', health(answer.Catalog)],
        ['Object store', health(answer.Store)],
        ['Media jobs', answer.JobQueue
          ? `${answer.JobQueue.Queued} queued, ${answer.JobQueue.Scheduled ?? 0} scheduled, `
            + `${answer.JobQueue.Running} running, ${answer.JobQueue.Failed} failed`
            + (answer.JobQueue.OldestQueuedAgeSeconds !== undefined ? `; oldest due job waiting ${age(answer.JobQueue.OldestQueuedAgeSeconds)}` : '')
          : 'Unknown (the catalog did not answer)'],
        ['Webhook backlog', answer.WebhookBacklog
          ? `${answer.WebhookBacklog.Pending} pending`
            + (answer.WebhookBacklog.OldestPendingAgeSeconds !== undefined ? `; oldest waiting ${age(answer.WebhookBacklog.OldestPendingAgeSeconds)}` : '')
          : 'Unknown (the catalog did not answer)'],
      ];
      if (answer.DiskFree) {
        const { FreeBytes: free, TotalBytes: total, ReserveBytes: reserve } = answer.DiskFree;
        const refusing = reserve !== undefined && free < reserve;
        rows.push(['Disk free', `${bytes(free)} of ${bytes(total)} (${total > 0 ? Math.round(free / total * 100) : 0} %)`
          + (refusing ? `; uploads refused: less than the ${bytes(reserve)} kept free` : '')]);
      }
      replace(summary, h('table', {},
        h('caption', { class: 'visually-hidden' }, 'Service status'),
        h('tbody', {}, rows.map(([name, value]) => h('tr', { dataset: { fact: name } },
          h('th', { scope: 'row' }, name), h('td', {}, value))))));
      replace(nodes, h('table', {},
        h('caption', { class: 'visually-hidden' }, 'Nodes'),
        h('thead', {}, h('tr', {}, ['Node', 'Role', 'Version', 'Started', 'Last seen', 'State'].map((n) => h('th', { scope: 'col' }, n)))),
        h('tbody', {}, answer.Nodes.map((node) => h('tr', { dataset: { node: node.Name, role: node.Role, stale: String(node.Stale) } },
          h('td', { class: 'url' }, node.Name), h('td', {}, node.Role), h('td', {}, node.Version),
          h('td', {}, time(node.StartedAt)), h('td', {}, time(node.LastSeen)),
          h('td', {}, node.Stale ? 'Stale' : 'Running'))))));
    } catch (error) {
      replace(summary, h('p', { class: 'error' }, error.message));
    }
    timer = setTimeout(load, 5000);
  }

  load();
  return () => clearTimeout(timer);
}
