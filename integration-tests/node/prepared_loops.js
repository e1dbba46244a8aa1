// Loops over mysql2's execute() (the binary protocol), for tests/prepared.rs.
//
// mysql2 prepares a statement once per connection and caches it; every execute() sends the
// parameter types again, and binds a JavaScript number as a DOUBLE.
//
// Usage: node prepared_loops.js loop|inserts --host H --port P --user U --password PW --db DB
//   loop     an N+1 loop: 200 books, then one execute() per book for its author
//            (the tables come from python/prepared_loops.py setup)
//   inserts  200 single-row INSERTs of numbers into pl_node_writes, one execute() each
//   creates  200 Sequelize Model.create() calls (an INSERT by mysql2's execute() each), the rows
//            differing only in a number (and their timestamps)
// Each prints a line the test checks.
'use strict';

const mysql = require('mysql2/promise');

function options(argv) {
  const o = {};
  for (let i = 1; i < argv.length; i += 2) {
    o[argv[i].replace(/^--/, '')] = argv[i + 1];
  }
  return { host: o.host, port: Number(o.port), user: o.user, password: o.password, database: o.db };
}

async function loop(conn) {
  const [books] = await conn.execute('SELECT id, author_id FROM pl_books WHERE id > ? ORDER BY id LIMIT 200', [0]);
  const names = new Set();
  for (const book of books) {
    const [rows] = await conn.execute('SELECT name FROM pl_authors WHERE id = ?', [book.author_id]);
    names.add(rows[0].name);
  }
  console.log(`names=${books.length} distinct=${names.size}`);
}

async function inserts(conn) {
  await conn.query('CREATE OR REPLACE TABLE pl_node_writes (id INT PRIMARY KEY, qty INT)');
  for (let i = 0; i < 200; i++) {
    await conn.execute('INSERT INTO pl_node_writes (id, qty) VALUES (?, ?)', [i, 1]);
  }
  const [[{ n }]] = await conn.query('SELECT COUNT(*) AS n FROM pl_node_writes');
  console.log(`inserted=${n}`);
}

async function creates(argv) {
  const { Sequelize, DataTypes } = require('sequelize');
  const o = options(argv);
  const sequelize = new Sequelize(o.database, o.user, o.password, {
    host: o.host,
    port: o.port,
    dialect: 'mysql',
    logging: false,
  });
  try {
    const Item = sequelize.define('Item', { qty: DataTypes.INTEGER }, { tableName: 'pl_seq_items' });
    await Item.sync({ force: true });
    for (let i = 0; i < 200; i++) {
      await Item.create({ qty: i });
    }
    console.log(`created=${await Item.count()}`);
  } finally {
    await sequelize.close();
  }
}

async function main() {
  const mode = process.argv[2];
  if (mode === 'creates') {
    return creates(process.argv.slice(2));
  }
  const conn = await mysql.createConnection(options(process.argv.slice(2)));
  try {
    if (mode === 'loop') {
      await loop(conn);
    } else if (mode === 'inserts') {
      await inserts(conn);
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
