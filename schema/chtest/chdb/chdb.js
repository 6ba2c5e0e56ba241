// chdb.js: ClickHouse 26.x in-process (chDB) for the Go tests (schema/chtest/chdb.go).
// One session (node chdb.js DIR: its databases live in DIR) answers one request a line
// on stdin, {"sql": "...", "format": "..."}, with one line on stdout, {"ok": true,
// "out": "<the result in that format>"} or {"ok": false, "error": "..."}.
"use strict";
const { Session } = require("chdb");
const readline = require("readline");

const session = new Session(process.argv[2]);
const lines = readline.createInterface({ input: process.stdin, terminal: false });
lines.on("line", (line) => {
  let answer;
  try {
    const req = JSON.parse(line);
    answer = { ok: true, out: session.query(req.sql, req.format || "TabSeparatedWithNamesAndTypes") };
  } catch (e) {
    answer = { ok: false, error: String((e && e.message) || e) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
lines.on("close", () => process.exit(0));
