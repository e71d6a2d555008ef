// The dashboard's entry: login (the bearer token, kept for the tab's life),
// the role of the token, and the hash routes #/PAGE[/ARG] to the pages.

import { get, learnRole, setToken, token } from './api.js';
import { errorBox, h } from './dom.js';
import * as item from './item.js';
import * as models from './models.js';
import * as overview from './overview.js';
import * as training from './training.js';
import * as user from './user.js';

const PAGES = { overview, training, models, user, item };

const session = { role: '', cleanups: [] };

function $(id) {
  return document.getElementById(id);
}

// What a page may ask of the app: the role and timers stopped on leaving.
function context() {
  return {
    role: session.role,
    isAdmin: session.role === 'admin',
    canWrite: session.role === 'admin' || session.role === 'write',
    every(ms, fn) {
      const id = setInterval(fn, ms);
      session.cleanups.push(() => clearInterval(id));
    },
    onLeave(fn) {
      session.cleanups.push(fn);
    },
  };
}

function leave() {
  for (const fn of session.cleanups.splice(0)) fn();
}

async function route() {
  leave();
  const [name, ...rest] = decodeURIComponent(location.hash.replace(/^#\/?/, '')).split('/');
  const page = PAGES[name] ? name : 'overview';
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('current', a.dataset.page === page);
  }
  const main = $('main');
  main.replaceChildren();
  main.dataset.page = page;
  try {
    await PAGES[page].render(main, context(), rest.join('/'));
  } catch (e) {
    if (e.status === 401) {
      showLogin('The token was refused; log in again.');
      return;
    }
    main.append(errorBox(e));
  }
}

function showLogin(message) {
  setToken('');
  session.role = '';
  $('main').replaceChildren();
  $('login').hidden = false;
  $('nav').hidden = true;
  $('logout').hidden = true;
  $('role').textContent = '';
  $('login-error').textContent = message || '';
  $('token').focus();
}

// Checks the token (a read call), learns its role and shows the pages.
async function start() {
  try {
    await get('/v1/stats');
    session.role = await learnRole();
  } catch (e) {
    if (e.status === 401 || e.status === 403) {
      showLogin(token() ? 'The server refused this token.' : '');
      return;
    }
    $('main').replaceChildren(errorBox(e));
    return;
  }
  $('login').hidden = true;
  $('nav').hidden = false;
  $('logout').hidden = !token();
  $('role').textContent = token() ? `role: ${session.role}` : 'no token needed';
  $('role').dataset.role = session.role;
  await route();
}

$('login-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  setToken($('token').value.trim());
  $('token').value = '';
  start();
});
$('logout').addEventListener('click', () => {
  leave();
  showLogin('Logged out.');
});
window.addEventListener('hashchange', () => {
  if (session.role) route();
});
start();
