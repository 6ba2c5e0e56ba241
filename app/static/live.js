// The live view's refresh (no inline script: the CSP forbids it). Every data-poll
// seconds it asks the feed (data-feed) for what was stored after data-cursor, puts the
// new rows on top (text only), keeps at most data-rows, and adds up the counts.
"use strict";
(function () {
  var table = document.getElementById("live");
  if (!table || !window.fetch) return;
  var body = table.tBodies[0];
  var poll = Number(table.getAttribute("data-poll")) * 1000;
  var keep = Number(table.getAttribute("data-rows"));
  function add(id, n) {
    var el = document.getElementById(id);
    el.textContent = String(Number(el.textContent) + n);
  }
  function show(feed) {
    for (var i = feed.rows.length - 1; i >= 0; i--) {
      var tr = document.createElement("tr");
      tr.className = "outcome-" + feed.rows[i].outcome;
      feed.rows[i].cells.forEach(function (c) {
        var td = document.createElement("td");
        td.textContent = c;
        tr.appendChild(td);
      });
      body.insertBefore(tr, body.firstChild);
    }
    while (body.rows.length > keep) body.deleteRow(body.rows.length - 1);
    add("live-accepted", feed.accepted);
    add("live-rejected", feed.rejected);
    add("live-skipped-accepted", feed.skipped_accepted);
    add("live-skipped-rejected", feed.skipped_rejected);
    add("live-not-stored", feed.not_stored);
    if (feed.skipped_accepted || feed.skipped_rejected || feed.not_stored) document.getElementById("live-sampled").hidden = false;
    if (body.rows.length) document.getElementById("live-empty").hidden = true;
    document.getElementById("live-lag").textContent = feed.lag;
    document.getElementById("live-at").textContent = feed.at;
    table.setAttribute("data-cursor", feed.cursor);
    table.setAttribute("data-reads", String(Number(table.getAttribute("data-reads") || 0) + 1));
  }
  function read() {
    var url = table.getAttribute("data-feed") + "?cursor=" + encodeURIComponent(table.getAttribute("data-cursor"));
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok || (r.headers.get("Content-Type") || "").indexOf("application/json") !== 0) throw new Error("status " + r.status);
        return r.json();
      })
      .then(function (feed) { show(feed); setTimeout(read, poll); },
        function () {
          document.getElementById("live-at").textContent = "failed (retrying; sign in again if your session ended)";
          setTimeout(read, poll * 5);
        });
  }
  setTimeout(read, poll);
})();
