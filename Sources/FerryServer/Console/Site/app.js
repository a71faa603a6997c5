// The console's shell: sign-in, navigation between pages (in the URL's fragment, so a reload stays on the page), and
// what happens when the session ends (the sign-in form comes back over the page; uploads wait and then go on).

import { currentSession, signIn, signOut, onSessionEnded, onSessionChangedElsewhere } from './api.js';
import { uploads } from './uploads.js';
import { libraryPage, resetLibrary } from './view-library.js';
import { videoPage } from './view-video.js';
import { uploadPage } from './view-upload.js';
import { keysPage } from './view-keys.js';
import { webhooksPage } from './view-webhooks.js';
import { statusPage } from './view-status.js';

const main = document.getElementById('main');
const bar = document.getElementById('bar');
const signInSection = document.getElementById('sign-in');
const form = document.getElementById('sign-in-form');
let session = null;
let leave = null;
let lastKey = null;

const routes = [
  [/^#\/library$/, () => libraryPage(main)],
  [/^#\/videos\/([0-9a-f]+)$/, (match) => videoPage(main, match[1])],
  [/^#\/upload$/, () => uploadPage(main)],
  [/^#\/keys$/, () => keysPage(main, session)],
  [/^#\/webhooks$/, () => webhooksPage(main, session)],
  [/^#\/status$/, () => statusPage(main, session)],
];

function route() {
  if (!session) return;
  if (leave) { leave(); leave = null; }
  const hash = location.hash || '#/library';
  for (const link of bar.querySelectorAll('nav a')) {
    if (hash.startsWith(link.getAttribute('href'))) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  for (const [pattern, page] of routes) {
    const match = pattern.exec(hash);
    if (match) {
      leave = page(match) || null;
      main.focus({ preventScroll: true });
      return;
    }
  }
  location.hash = '#/library';
}

function showSignIn(reason) {
  session = null;
  signInSection.hidden = false;
  bar.hidden = true;
  main.hidden = true;
  main.replaceChildren();
  const note = document.getElementById('sign-in-reason');
  note.hidden = !reason;
  note.textContent = reason || '';
  document.getElementById('access-key-id').focus();
}

function signedIn(current) {
  // Another key starts from the library's first page, without the filters of the key before.
  if (current.AccessKeyId !== lastKey) resetLibrary();
  lastKey = current.AccessKeyId;
  session = current;
  signInSection.hidden = true;
  bar.hidden = false;
  main.hidden = false;
  document.getElementById('who').textContent = `${current.AccessKeyId}${current.Root ? ' (root)' : ''}`;
  document.getElementById('nav-keys').hidden = !current.Root;
  document.getElementById('nav-webhooks').hidden = !current.Root;
  document.getElementById('nav-status').hidden = !current.Root;
  uploads.signedIn(current.AccessKeyId);
  route();
}

form.addEventListener('submit', async (event) => {
  event.preventDefault();
  const error = document.getElementById('sign-in-error');
  error.textContent = '';
  const id = document.getElementById('access-key-id');
  const secret = document.getElementById('secret-access-key');
  const button = form.querySelector('button');
  button.disabled = true;
  try {
    const current = await signIn(id.value.trim(), secret.value);
    secret.value = '';
    signedIn(current);
  } catch (failure) {
    error.textContent = failure.message;
    secret.focus();
  } finally {
    button.disabled = false;
  }
});

document.getElementById('sign-out').addEventListener('click', async () => {
  for (const upload of uploads.active) upload.pause();
  await signOut().catch(() => {});
  if (leave) { leave(); leave = null; }
  showSignIn('Signed out.');
});

onSessionEnded(() => {
  if (!session) return;
  if (leave) { leave(); leave = null; }
  const waiting = uploads.active.length;
  showSignIn(waiting > 0
    ? `Your session ended. Sign in again to go on: ${waiting} upload${waiting === 1 ? '' : 's'} will continue where ${waiting === 1 ? 'it' : 'they'} stopped.`
    : 'Your session ended; sign in again.');
});

// Another tab signed in or out: the cookie is that tab's session now, so this page shows (and acts as) that key, or
// the sign-in form; never one key while acting as another.
let changes = 0;
onSessionChangedElsewhere(async () => {
  const mine = ++changes;
  // null: signed out; undefined: the service did not answer (the session is unknown, not ended).
  const next = await currentSession().catch(() => undefined);
  if (mine !== changes || next === undefined) return;
  if (next && session && next.AccessKeyId === session.AccessKeyId) { session = next; return; }
  if (leave) { leave(); leave = null; }
  if (next) signedIn(next);
  else if (session) showSignIn('You signed out in another tab; sign in again.');
});

uploads.addEventListener('change', () => {
  const badge = document.getElementById('upload-count');
  const count = uploads.active.length;
  badge.hidden = count === 0;
  badge.textContent = String(count);
});

window.addEventListener('hashchange', route);

const current = await currentSession().catch(() => null);
if (current) signedIn(current); else showSignIn('');
