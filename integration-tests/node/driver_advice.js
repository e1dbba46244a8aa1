// The patterns whose fix rttscope words for mysql2, and each fix as advised, for
// tests/driver_advice.rs: the advised code must give the same rows and no finding.
//
// Usage: node driver_advice.js MODE --host H --port P --user U --password PW --db DB
//   loop              an N+1 loop: the orders, then one query per order for its customer
//   loop-advised      `connection.query('... IN (?)', [keys])`: the customers in one query
//   inserts           40 single-row INSERTs into df_writes, one query each
//   inserts-advised   `connection.query('INSERT INTO t (a, b) VALUES ?', [rows])`
//   creates           40 Sequelize `Model.create()` calls into df_items
//   creates-advised   one Sequelize `Model.bulkCreate(rows)`
//   churn             40 queries, each on a connection of its own (`createConnection`)
//   churn-advised     40 queries on `mysql.createPool({...})`, made once
//   chatty            60 requests on a pool, each a ping and a SET time_zone before its query
//   chatty-advised    the SET once per connection in the pool's `connection` event, no pings
//                     (`enableKeepAlive` keeps idle connections alive instead)
// The tables come from python/driver_fixes.py setup. Each prints a line the test checks, read
// back from the server.
'use strict';

const mysql = require('mysql2/promise');

const ROWS = Array.from({ length: 40 }, (_, i) => [i, `w${i}`]);

function options(argv) {
  const o = {};
  for (let i = 1; i < argv.length; i += 2) {
    o[argv[i].replace(/^--/, '')] = argv[i + 1];
  }
  return { host: o.host, port: Number(o.port), user: o.user, password: o.password, database: o.db };
}

async function loop(conn, advised) {
  const [orders] = await conn.query('SELECT id, customer FROM df_orders ORDER BY id');
  const keys = orders.map((o) => o.customer);
  let names = [];
  if (advised) {
    const [rows] = await conn.query('SELECT id, name FROM df_customers WHERE id IN (?)', [keys]);
    names = rows.map((r) => r.name);
  } else {
    for (const key of keys) {
      const [rows] = await conn.query('SELECT name FROM df_customers WHERE id = ?', [key]);
      names.push(rows[0].name);
    }
  }
  console.log(`names=${names.length} distinct=${new Set(names).size}`);
}

async function inserts(conn, advised) {
  await conn.query('DELETE FROM df_writes');
  // In one transaction, as an application writes a batch.
  await conn.beginTransaction();
  if (advised) {
    await conn.query('INSERT INTO df_writes (id, name) VALUES ?', [ROWS]);
  } else {
    for (const row of ROWS) {
      await conn.query('INSERT INTO df_writes (id, name) VALUES (?, ?)', row);
    }
  }
  await conn.commit();
  const [[r]] = await conn.query('SELECT COUNT(*) AS n, SUM(id) AS s, MAX(name) AS m FROM df_writes');
  console.log(`inserted=${r.n} sum=${r.s} max=${r.m}`);
}

async function creates(o, advised) {
  const { Sequelize, DataTypes } = require('sequelize');
  const sequelize = new Sequelize(o.database, o.user, o.password, {
    host: o.host,
    port: o.port,
    dialect: 'mysql',
    logging: false,
  });
  try {
    const Item = sequelize.define('Item', { qty: DataTypes.INTEGER }, { tableName: 'df_items' });
    await Item.sync({ force: true });
    const rows = ROWS.map(([i]) => ({ qty: i }));
    // In one transaction (START TRANSACTION), as an application writes a batch.
    await sequelize.transaction(async (transaction) => {
      if (advised) {
        await Item.bulkCreate(rows, { transaction });
      } else {
        for (const row of rows) {
          await Item.create(row, { transaction });
        }
      }
    });
    console.log(`created=${await Item.count()} sum=${await Item.sum('qty')}`);
  } finally {
    await sequelize.close();
  }
}

async function churn(o, advised) {
  let total = 0;
  if (advised) {
    const pool = mysql.createPool({ ...o, connectionLimit: 4 });
    for (let i = 1; i <= 40; i++) {
      const [[r]] = await pool.query('SELECT ? AS v', [i]);
      total += Number(r.v);
    }
    await pool.end();
  } else {
    for (let i = 1; i <= 40; i++) {
      const conn = await mysql.createConnection(o);
      const [[r]] = await conn.query('SELECT ? AS v', [i]);
      total += Number(r.v);
      await conn.end();
    }
  }
  console.log(`queries=40 sum=${total}`);
}

async function chatty(o, advised) {
  const setZone = "SET time_zone = '+00:00'";
  const pool = mysql.createPool({ ...o, connectionLimit: 2, enableKeepAlive: advised });
  if (advised) {
    // The event hands over the callback connection: its query() queues the SET ahead of any
    // query the pool's user sends.
    pool.on('connection', (conn) => conn.query(setZone));
  }
  let names = 0;
  for (let i = 0; i < 60; i++) {
    const conn = await pool.getConnection();
    if (!advised) {
      await conn.ping();
      await conn.query(setZone);
    }
    const [rows] = await conn.query('SELECT name FROM df_customers WHERE id = ?', [(i % 50) + 1]);
    names += rows.length;
    conn.release();
  }
  const [[r]] = await pool.query('SELECT @@time_zone AS zone');
  console.log(`requests=60 names=${names} time_zone=${r.zone}`);
  await pool.end();
}

async function main() {
  const mode = process.argv[2];
  const o = options(process.argv.slice(2));
  if (mode.startsWith('creates')) {
    return creates(o, mode === 'creates-advised');
  }
  if (mode.startsWith('churn')) {
    return churn(o, mode === 'churn-advised');
  }
  if (mode.startsWith('chatty')) {
    return chatty(o, mode === 'chatty-advised');
  }
  const conn = await mysql.createConnection(o);
  try {
    if (mode.startsWith('loop')) {
      await loop(conn, mode === 'loop-advised');
    } else if (mode.startsWith('inserts')) {
      await inserts(conn, mode === 'inserts-advised');
    } else {
      throw new Error(`unknown mode ${mode}`);
    }
  } finally {
    await conn.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
