// Node's mysql2 logging in to a MySQL-8-style server (python/mysql8_server.py), directly or
// through rttscope, as python/mysql8_login.py does: for each account, the server's cache
// emptied (SIGHUP, as a restart), then two logins (full, then fast), each running
// SELECT CURRENT_USER().
//
// Usage: node mysql8_login.js HOST PORT tls|plain SERVER_PID SERVER_LOG USER:PASSWORD...
// Prints "USER N: ANSWER" or "USER N: error CODE MESSAGE" for each login.
'use strict';

const fs = require('fs');
const mysql = require('mysql2/promise');

const flushes = (log) => fs.readFileSync(log, 'utf8').split('- flush').length - 1;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function flush(pid, log) {
  const before = flushes(log);
  process.kill(pid, 'SIGHUP');
  for (let waited = 0; flushes(log) === before; waited += 10) {
    if (waited > 10000) throw new Error('the server did not flush its cache');
    await sleep(10);
  }
}

async function login(host, port, tls, user, password) {
  // The server's certificate is self-signed; the key exchange over a plain leg is allowed.
  const ssl = tls ? { rejectUnauthorized: false } : undefined;
  let conn;
  try {
    conn = await mysql.createConnection({ host, port, user, password, ssl, connectTimeout: 10000 });
  } catch (e) {
    return `error ${e.errno} ${String(e.message).replace(/\n/g, ' ')}`;
  }
  const [rows] = await conn.query('SELECT CURRENT_USER()');
  await conn.end();
  return Object.values(rows[0])[0];
}

async function main() {
  const [host, port, leg, pid, log, ...accounts] = process.argv.slice(2);
  for (const account of accounts) {
    const [user, password] = [account.slice(0, account.indexOf(':')), account.slice(account.indexOf(':') + 1)];
    await flush(Number(pid), log);
    for (const n of [1, 2]) {
      console.log(`${user} ${n}: ${await login(host, Number(port), leg === 'tls', user, password)}`);
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
