// The application's one script for every page (no inline script: the CSP forbids it).
// Copy buttons: <button data-copy="ID"> copies the text (or value) of element ID.
"use strict";
(function () {
  function textOf(el) {
    return el.value !== undefined && el.tagName !== "BUTTON" ? el.value : el.textContent;
  }
  function fallbackCopy(text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.className = "offscreen";
    document.body.appendChild(ta);
    ta.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(ta);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("button[data-copy]");
    if (!btn) return;
    var el = document.getElementById(btn.getAttribute("data-copy"));
    if (!el) return;
    var text = textOf(el).trim();
    var p = navigator.clipboard && window.isSecureContext ? navigator.clipboard.writeText(text) : fallbackCopy(text);
    var label = btn.textContent;
    p.then(function () {
      btn.textContent = "Copied";
      btn.setAttribute("data-copied", "yes");
    }, function () {
      btn.textContent = "Select and copy by hand";
    }).then(function () {
      setTimeout(function () { btn.textContent = label; }, 2000);
    });
  });
})();
