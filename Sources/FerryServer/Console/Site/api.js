// The console's requests: the session (cookie plus CSRF token), the media API for the session, and the multipart
// signing endpoints.

// The session's CSRF token, kept in this origin's storage (another port of the host has storage of its own): the
// service describes a session only to a page that sends it, so a session cookie another origin of the host put in
// place of the user's is not taken as this page's.
const tokenKey = 'ferry.console.csrf';
function storedToken() { try { return localStorage.getItem(tokenKey); } catch { return null; } }
function storeToken(value) {
  try { if (value) localStorage.setItem(tokenKey, value); else localStorage.removeItem(tokenKey); } catch { /* none */ }
}
// Counts the session's changes (signed in, signed out, ended): a refusal of a request sent under an earlier session
// (a page's request still on its way when the user signed out and in again) ends nothing.
let generation = 0;
const listeners = new Set();

/** An error answered by the service. */
export class ServiceError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

/** Calls `handler` whenever a request finds the session ended. */
export function onSessionEnded(handler) { listeners.add(handler); }

/** Calls `handler` when another tab of this origin signs in or out: the session cookie and its token are the
 * browser's, shared by every tab, so this page acts for whoever signed in last. */
export function onSessionChangedElsewhere(handler) {
  window.addEventListener('storage', (event) => {
    if (event.key !== tokenKey && event.key !== null) return;
    generation += 1;
    handler();
  });
}

function sessionEnded(error) { storeToken(null); generation += 1; for (const handler of listeners) handler(error); }

async function request(method, url, body, { allowSignedOut = false } = {}) {
  const sentIn = generation;
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const csrf = storedToken();
  if (csrf) headers['X-Ferry-CSRF'] = csrf;
  let response;
  try {
    response = await fetch(url, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (error) {
    throw new ServiceError(0, 'NetworkError', 'The service cannot be reached; check the network.');
  }
  let data = {};
  const text = await response.text();
  if (text) { try { data = JSON.parse(text); } catch { data = {}; } }
  if (!response.ok) {
    const code = data.code || data.error?.code || `HTTP${response.status}`;
    const message = data.message || data.error?.message || response.statusText;
    const error = new ServiceError(response.status, code, message);
    if (response.status === 401 && !allowSignedOut && sentIn === generation) sessionEnded(error);
    throw error;
  }
  return data;
}

/** The signed-in session, or null. */
export async function currentSession() {
  try {
    return await request('GET', '/_ferry/console/session', undefined, { allowSignedOut: true });
  } catch (error) {
    if (error.status === 401) return null;
    throw error;
  }
}

/** Signs in with an access key; the secret goes to the service once and is not kept. */
export async function signIn(accessKeyId, secretAccessKey) {
  const session = await request('POST', '/_ferry/console/session', { AccessKeyId: accessKeyId, SecretAccessKey: secretAccessKey },
    { allowSignedOut: true });
  storeToken(session.CSRFToken);
  generation += 1;
  return session;
}

/** Ends the session. */
export async function signOut() {
  generation += 1;
  try {
    await request('DELETE', '/_ferry/console/session', undefined, { allowSignedOut: true });
  } finally {
    storeToken(null);
  }
}

/** Calls a media API action for the session. */
export function media(action, input = {}) {
  return request('POST', `/_ferry/console/api/${encodeURIComponent(action)}`, input);
}

/** Calls a multipart signing endpoint (`/s3/multipart…`). */
export function multipart(method, path, body) {
  return request(method, `/s3/multipart${path}`, body);
}
