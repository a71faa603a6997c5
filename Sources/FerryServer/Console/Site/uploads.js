// Uploads from the browser: each file becomes a video (or an image) and its bytes go in parallel multipart parts
// straight to the object API, with part URLs the service signs. What an upload has stored is remembered in
// localStorage (never a credential), so after a reload or a dropped network the same file resumes from the parts the
// service already has (ListParts), sending only the rest.

import { multipart, media, ServiceError } from './api.js';

const MiB = 1024 * 1024;
const PARALLEL_PARTS = 3;
const PART_ATTEMPTS = 5;
const JOURNAL = 'ferry.console.uploads';

/** Part size for a file: 5 MiB, larger when the file would need more than 10000 parts. */
export function partSize(size) {
  let part = 5 * MiB;
  while (Math.ceil(size / part) > 10000) part *= 2;
  return part;
}

function fingerprint(file) { return `${file.name}|${file.size}|${file.lastModified}`; }

/** The access key signed in: each key has its own journal, so one browser shared by two keys keeps them apart. */
let journalOwner = '';

function readJournal() {
  try { return JSON.parse(localStorage.getItem(`${JOURNAL}.${journalOwner}`) || '{}'); } catch { return {}; }
}

function writeJournal(journal) { localStorage.setItem(`${JOURNAL}.${journalOwner}`, JSON.stringify(journal)); }

/** Unfinished uploads from earlier visits: pick the same file again to resume one. */
export function unfinished() {
  return Object.values(readJournal());
}

/** Forgets an unfinished upload from an earlier visit, aborting it on the service. */
export async function discard(entry) {
  const journal = readJournal();
  delete journal[entry.fingerprint];
  writeJournal(journal);
  try {
    await multipart('DELETE', `/${encodeURIComponent(entry.uploadId)}?key=${encodeURIComponent(entry.key)}`);
    if (entry.videoId) await media('DeleteVideo', { VideoIds: entry.videoId });
    if (entry.imageId) await media('DeleteImage', { ImageIds: entry.imageId });
  } catch { /* gone already */ }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One file's upload. States: creating, uploading, paused, waiting (for sign-in), offline (the network dropped: tried
 * again by itself, and at once when the browser is back online), completing, processing, done, failed, cancelled.
 */
export class FileUpload extends EventTarget {
  constructor(file, manager) {
    super();
    this.file = file;
    this.manager = manager;
    this.id = crypto.randomUUID();
    this.state = 'queued';
    this.partSize = partSize(file.size);
    this.partCount = Math.max(1, Math.ceil(file.size / this.partSize));
    this.etags = new Map();           // part number → ETag, for parts the service stored
    this.inFlight = new Map();        // part number → { xhr, loaded }
    this.sentParts = 0;               // parts sent in this page
    this.skippedParts = 0;            // parts found stored already when resuming
    this.error = null;
    this.samples = [];
    this.videoId = null;
    this.imageId = null;
    this.status = null;
  }

  get storedBytes() {
    let total = 0;
    for (const number of this.etags.keys()) total += this.partLength(number);
    return total;
  }

  get sentBytes() {
    let total = this.storedBytes;
    for (const part of this.inFlight.values()) total += part.loaded;
    return Math.min(total, this.file.size);
  }

  get fraction() { return this.file.size === 0 ? (this.state === 'done' || this.state === 'processing' ? 1 : 0) : this.sentBytes / this.file.size; }

  /** Bytes per second over the last few seconds. */
  get speed() {
    if (this.samples.length < 2) return 0;
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    const seconds = (last.at - first.at) / 1000;
    return seconds > 0 ? Math.max(0, (last.bytes - first.bytes) / seconds) : 0;
  }

  /** Seconds left at the current speed, or null. */
  get eta() {
    const speed = this.speed;
    return speed > 0 ? (this.file.size - this.sentBytes) / speed : null;
  }

  partLength(number) {
    const start = (number - 1) * this.partSize;
    return Math.max(0, Math.min(this.partSize, this.file.size - start));
  }

  changed() {
    const now = Date.now();
    this.samples.push({ at: now, bytes: this.sentBytes });
    while (this.samples.length > 2 && now - this.samples[0].at > 5000) this.samples.shift();
    this.dispatchEvent(new Event('change'));
  }

  setState(state, error = null) {
    this.state = state;
    this.error = error;
    this.changed();
  }

  journalEntry() {
    return {
      fingerprint: fingerprint(this.file), name: this.file.name, size: this.file.size, key: this.key,
      uploadId: this.uploadId, videoId: this.videoId, imageId: this.imageId, partCount: this.partCount,
      startedAt: this.startedAt || new Date().toISOString(),
    };
  }

  async start() {
    if (['uploading', 'creating', 'completing', 'done', 'processing', 'cancelled'].includes(this.state)) return;
    try {
      if (!this.uploadId) {
        this.setState('creating');
        const earlier = readJournal()[fingerprint(this.file)];
        if (earlier && !(await this.resumeFrom(earlier))) {
          const journal = readJournal();
          delete journal[earlier.fingerprint];
          writeJournal(journal);
        }
        if (!this.uploadId) await this.create();
      }
      this.setState('uploading');
      this.pump();
    } catch (error) {
      this.fail(error);
    }
  }

  /** Picks up an upload an earlier page started: the parts the service has are not sent again. */
  async resumeFrom(entry) {
    try {
      const parts = await multipart('GET', `/${encodeURIComponent(entry.uploadId)}?key=${encodeURIComponent(entry.key)}`);
      this.key = entry.key;
      this.uploadId = entry.uploadId;
      this.videoId = entry.videoId;
      this.imageId = entry.imageId;
      this.startedAt = entry.startedAt;
      for (const part of parts) {
        if (part.PartNumber <= this.partCount && Number(part.Size) === this.partLength(part.PartNumber)) {
          this.etags.set(part.PartNumber, part.ETag);
        }
      }
      this.skippedParts = this.etags.size;
      this.resumed = true;
      return true;
    } catch (error) {
      if (error.status === 401) throw error;
      return false;
    }
  }

  async create() {
    const created = await multipart('POST', '', {
      filename: this.file.name, type: this.file.type || 'application/octet-stream',
      metadata: { title: this.title || this.file.name.replace(/\.[^.]+$/, '') || this.file.name, size: String(this.file.size) },
    });
    this.key = created.key;
    this.uploadId = created.uploadId;
    this.videoId = created.videoId || null;
    this.imageId = created.imageId || null;
    this.startedAt = new Date().toISOString();
    const journal = readJournal();
    journal[fingerprint(this.file)] = this.journalEntry();
    writeJournal(journal);
  }

  nextPart() {
    for (let number = 1; number <= this.partCount; number += 1) {
      if (!this.etags.has(number) && !this.inFlight.has(number)) return number;
    }
    return null;
  }

  pump() {
    if (this.state !== 'uploading') return;
    while (this.inFlight.size < PARALLEL_PARTS) {
      const number = this.nextPart();
      if (number === null) break;
      const entry = { xhr: null, loaded: 0 };
      this.inFlight.set(number, entry);
      this.sendPart(number, entry).then(() => this.pump(), (error) => this.partFailed(number, entry, error));
    }
    if (this.inFlight.size === 0 && this.etags.size === this.partCount) this.complete();
  }

  /** Sends part `number` while `entry` is its attempt in flight (a pause or a newer attempt ends this one). */
  async sendPart(number, entry) {
    for (let attempt = 1; ; attempt += 1) {
      if (this.state !== 'uploading' || this.inFlight.get(number) !== entry) throw Object.assign(new Error('stopped'), { stopped: true });
      try {
        const signed = await multipart('GET', `/${encodeURIComponent(this.uploadId)}/${number}?key=${encodeURIComponent(this.key)}`);
        // Paused, cancelled or stopped while the part was being signed: send nothing.
        if (this.state !== 'uploading' || this.inFlight.get(number) !== entry) throw Object.assign(new Error('stopped'), { stopped: true });
        const etag = await this.put(number, signed, entry);
        if (this.inFlight.get(number) === entry) this.inFlight.delete(number);
        this.etags.set(number, etag);
        this.sentParts += 1;
        this.changed();
        return;
      } catch (error) {
        if (error.stopped || error.status === 401 || error.status === 403 || error.status === 404 || attempt >= PART_ATTEMPTS) throw error;
        entry.loaded = 0;
        this.changed();
        await sleep(Math.min(8000, 500 * 2 ** attempt) * (0.5 + Math.random()));
      }
    }
  }

  put(number, signed, entry) {
    return new Promise((resolve, reject) => {
      const start = (number - 1) * this.partSize;
      const xhr = new XMLHttpRequest();
      entry.xhr = xhr;
      xhr.open(signed.method || 'PUT', signed.url);
      for (const [name, value] of Object.entries(signed.headers || {})) xhr.setRequestHeader(name, value);
      xhr.upload.onprogress = (event) => {
        entry.loaded = event.loaded;
        this.changed();
      };
      xhr.onload = () => {
        const etag = xhr.getResponseHeader('ETag');
        if (xhr.status >= 200 && xhr.status < 300 && etag) { resolve(etag); return; }
        const code = /<Code>([^<]+)<\/Code>/.exec(xhr.responseText || '')?.[1] || `HTTP${xhr.status}`;
        // An expired or refused part URL is signed again by the next attempt.
        reject(new ServiceError(xhr.status === 403 ? 0 : xhr.status, code, `Part ${number} was refused (${code}).`));
      };
      xhr.onerror = () => reject(new ServiceError(0, 'NetworkError', 'The network dropped.'));
      xhr.onabort = () => reject(Object.assign(new Error('stopped'), { stopped: true }));
      xhr.send(this.file.slice(start, start + this.partLength(number)));
    });
  }

  partFailed(number, entry, error) {
    if (this.inFlight.get(number) === entry) this.inFlight.delete(number);
    if (error.stopped) { this.changed(); return; }
    if (error.status === 401) {
      // The session ended: hold everything until sign-in, then go on from the stored parts.
      this.stopParts();
      this.setState('waiting');
      return;
    }
    this.fail(error);
  }

  fail(error) {
    this.stopParts();
    if (error?.status === 401) { this.setState('waiting'); return; }
    if (error?.code === 'NetworkError' || !navigator.onLine) {
      // The network dropped for longer than a part's retries: try again by itself, sooner when the browser says it
      // is online again.
      this.offlineRetries = (this.offlineRetries || 0) + 1;
      const delay = Math.min(30000, 2000 * this.offlineRetries);
      clearTimeout(this.offlineTimer);
      this.offlineTimer = setTimeout(() => this.resume(), delay);
      this.setState('offline', error?.message || 'The network dropped.');
      return;
    }
    this.setState('failed', error?.message || String(error));
  }

  stopParts() {
    for (const part of this.inFlight.values()) part.xhr?.abort();
    this.inFlight.clear();
  }

  pause() {
    if (!['uploading', 'creating', 'waiting', 'offline'].includes(this.state)) return;
    clearTimeout(this.offlineTimer);
    this.setState('paused');
    this.stopParts();
    this.changed();
  }

  resume() {
    if (!['paused', 'failed', 'waiting', 'offline'].includes(this.state)) return;
    clearTimeout(this.offlineTimer);
    this.state = 'queued';
    this.start();
  }

  async cancel() {
    const previous = this.state;
    if (['done', 'processing', 'cancelled'].includes(previous)) return;
    clearTimeout(this.offlineTimer);
    this.setState('cancelled');
    this.stopParts();
    const journal = readJournal();
    delete journal[fingerprint(this.file)];
    writeJournal(journal);
    if (this.uploadId) {
      try {
        await multipart('DELETE', `/${encodeURIComponent(this.uploadId)}?key=${encodeURIComponent(this.key)}`);
        if (this.videoId) await media('DeleteVideo', { VideoIds: this.videoId });
        if (this.imageId) await media('DeleteImage', { ImageIds: this.imageId });
      } catch { /* the collector removes what is left */ }
    }
  }

  async complete() {
    if (this.state !== 'uploading') return;
    this.setState('completing');
    try {
      const parts = [...this.etags.entries()].sort((a, b) => a[0] - b[0]).map(([PartNumber, ETag]) => ({ PartNumber, ETag }));
      await multipart('POST', `/${encodeURIComponent(this.uploadId)}/complete?key=${encodeURIComponent(this.key)}`, { parts });
      const journal = readJournal();
      delete journal[fingerprint(this.file)];
      writeJournal(journal);
      this.offlineRetries = 0;
      this.setState(this.videoId ? 'processing' : 'done');
      if (this.videoId) this.follow();
    } catch (error) {
      if (error.status === 401 || error.code === 'NetworkError' || error.status >= 500) { this.fail(error); return; }
      this.setState('failed', error.message);
    }
  }

  /** Follows the video's status after the upload until it is playable or failed. */
  async follow() {
    for (;;) {
      try {
        const info = await media('GetVideoInfo', { VideoId: this.videoId });
        this.status = info.Video.Status;
        this.progress = info.Video.ProcessingProgress;
        this.changed();
        if (['Normal', 'TranscodeFail'].includes(this.status)) { this.setState('done'); return; }
      } catch (error) {
        if (error.status !== 401 && error.status !== 0) { this.setState('done'); return; }
      }
      await sleep(2000);
    }
  }
}

/** Every upload of this page. */
export class UploadManager extends EventTarget {
  constructor() {
    super();
    this.uploads = [];
  }

  add(files) {
    for (const file of files) {
      const upload = new FileUpload(file, this);
      upload.addEventListener('change', () => this.dispatchEvent(new Event('change')));
      this.uploads.push(upload);
      upload.start();
    }
    this.dispatchEvent(new Event('change'));
  }

  /** Uploads that are still moving bytes or waiting to. */
  get active() { return this.uploads.filter((u) => ['queued', 'creating', 'uploading', 'paused', 'waiting', 'offline', 'completing'].includes(u.state)); }

  /** Goes on with uploads that stopped because the network dropped, once the browser is online again. */
  online() {
    for (const upload of this.uploads) if (upload.state === 'offline') upload.resume();
  }

  /** Goes on with uploads held while the session was over. Another key than theirs neither sees nor resumes them:
   * they stop and are let go, their parts kept in their key's journal for when it picks the same file again. */
  signedIn(accessKeyId) {
    if (accessKeyId !== journalOwner) {
      for (const upload of this.uploads) upload.pause();
      this.uploads = [];
      journalOwner = accessKeyId;
      this.dispatchEvent(new Event('change'));
    }
    for (const upload of this.uploads) if (upload.state === 'waiting') upload.resume();
  }
}

export const uploads = new UploadManager();
window.addEventListener('online', () => uploads.online());
