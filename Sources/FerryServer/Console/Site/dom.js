// Building elements: every string becomes a text node or an attribute value, never markup, so a title such as
// <img src=x onerror=alert(1)> shows as those characters.

/** Creates an element with attributes (`on…` are listeners) and children (strings become text). */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value);
    } else if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (name === 'value' || name === 'checked' || name === 'disabled' || name === 'selected') {
      element[name] = value;
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : visible(String(child)));
  }
}

/** Text with its bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) shown as their code
 * points: a right-to-left override in a name would otherwise show `gnp.exe` as `exe.png`. */
export function visible(text) {
  return text.replace(/[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g,
    (c) => `<U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}>`);
}

/** Replaces an element's children. */
export function replace(element, ...children) {
  element.replaceChildren();
  append(element, children);
}

/** `url` when the console may show it as an image, else null: the service's own pictures (this origin, or a playback
 * URL of its public endpoint, which its Content-Security-Policy allows). A cover URL an app set points anywhere, and
 * is shown as a link instead. */
export function ownImage(url) {
  if (!url) return null;
  try {
    const parsed = new URL(url, location.href);
    const own = parsed.origin === location.origin
      || (/^https?:$/.test(parsed.protocol) && parsed.pathname.startsWith('/_ferry/play/'));
    return own ? url : null;
  } catch {
    return null;
  }
}

/** A byte count for people: 1.5 MB. */
export function bytes(count) {
  if (count === null || count === undefined || Number.isNaN(count)) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = Number(count);
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return `${value.toFixed(unit === 0 || value >= 100 ? 0 : 1)} ${units[unit]}`;
}

/** Seconds as 1:05 or 1:02:03. */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(Number(seconds))) return '—';
  const total = Math.round(Number(seconds));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

/** An ISO 8601 time in the reader's locale. */
export function time(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? '—' : date.toLocaleString();
}

/** Shows a short message for a few seconds (announced to screen readers). */
export function toast(message) {
  const element = document.getElementById('toast');
  element.textContent = message;
  element.classList.add('show');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => element.classList.remove('show'), 3500);
}

/** Copies text to the clipboard; says whether it worked. */
export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast('Copied');
  } catch {
    toast('Copy failed: select the text and copy it by hand');
  }
}

/** Asks a yes/no question in a modal dialog; resolves to true for yes. */
export function confirmDialog(question, yes = 'Delete') {
  return new Promise((resolve) => {
    const dialog = h('dialog', { 'aria-labelledby': 'confirm-text' },
      h('p', { id: 'confirm-text' }, question),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'danger', id: 'confirm-yes', onclick: () => { dialog.close('yes'); } }, yes),
        h('button', { type: 'button', onclick: () => { dialog.close('no'); } }, 'Cancel')));
    dialog.addEventListener('close', () => { dialog.remove(); resolve(dialog.returnValue === 'yes'); });
    document.body.append(dialog);
    dialog.showModal();
  });
}
