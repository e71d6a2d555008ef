// Calls of the rbmrec HTTP/JSON API (docs/http.md) from the page: the
// bearer token (kept in sessionStorage: this tab only), JSON calls with the
// API's error body, and Train's server-sent events over fetch (EventSource
// cannot POST or send a header).

const TOKEN_KEY = 'rbmrec.token';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) {
    sessionStorage.setItem(TOKEN_KEY, value);
  } else {
    sessionStorage.removeItem(TOKEN_KEY);
  }
}

// A failed call: HTTP status, the API's reason and message when it sent
// its JSON error body.
export class ApiError extends Error {
  constructor(status, body, text) {
    const err = body && body.error ? body.error : null;
    super(err && err.message ? err.message : `HTTP ${status}: ${text || ''}`);
    this.status = status;
    this.reason = err ? err.reason || err.status || '' : '';
  }
}

function headers(extra) {
  const h = Object.assign({ Accept: 'application/json' }, extra || {});
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function failure(response) {
  const text = await response.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch (e) {
    body = null;
  }
  return new ApiError(response.status, body, text);
}

// One JSON call; resolves to the parsed answer, rejects with ApiError.
export async function call(method, path, body) {
  const init = { method, cache: 'no-store', headers: headers() };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

export const get = (path) => call('GET', path);
export const post = (path, body) => call('POST', path, body || {});

// "?a=1&b=x&b=y" from {a: 1, b: ['x', 'y']}; empty values are left out.
export function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    const list = Array.isArray(value) ? value : [value];
    for (const v of list) {
      if (v !== undefined && v !== null && v !== '') q.append(key, String(v));
    }
  }
  const text = q.toString();
  return text ? `?${text}` : '';
}

// POSTs `body` to a server-sent-events route and calls onEvent with each
// event's parsed JSON data, in order; resolves when the server ends the
// stream. A refusal before the stream starts rejects with ApiError.
export async function stream(path, body, onEvent) {
  const response = await fetch(path, {
    method: 'POST',
    cache: 'no-store',
    headers: headers({
      'Content-Type': 'application/json',
      Accept: 'text/event-stream',
    }),
    body: JSON.stringify(body || {}),
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n');
      if (data) onEvent(JSON.parse(data));
    }
  }
}

// Whether `probe` passes the token check: false when it is refused with
// 403, true when it succeeds or fails for another reason; 401 rejects.
async function allowed(probe) {
  try {
    await probe();
    return true;
  } catch (e) {
    if (e.status === 401) throw e;
    return e.status !== 403;
  }
}

// The token's role: 'admin', 'write' or 'read'. There is no "who am I"
// call: PinModel (admin only) of version 0 is refused by the token check
// (403) for a read or write token and by its argument check (400, nothing
// changes) for an admin, or when the server checks no tokens; then
// GetUserRatings (write) without a user: 403 for a read token, 400 (the
// empty user_id, nothing read) for a write token.
export async function learnRole() {
  if (await allowed(() => post('/v1/models/0:pin', { pinned: false }))) return 'admin';
  if (await allowed(() => post('/v1/rbmrec.v1.Rbmrec/GetUserRatings', {}))) return 'write';
  return 'read';
}
