// The pixel page's chart: uPlot over the data the page carries in #chart's data-chart
// attribute (JSON; the table beside it has the same figures).
"use strict";
(function () {
  var el = document.getElementById("chart");
  if (!el || typeof uPlot === "undefined") return;
  var d = JSON.parse(el.getAttribute("data-chart"));
  var series = [{ label: "Day", value: "{YYYY}-{MM}-{DD}" },
    { label: "Events", stroke: "#1f5fbf", width: 2, scale: "n" }];
  var data = [d.dates, d.events];
  if (d.people) {
    series.push({ label: "Unique people", stroke: "#b0421f", width: 2, scale: "n" });
    data.push(d.people);
  }
  series.push({ label: "Value" + (d.currency ? " (" + d.currency + ")" : ""), stroke: "#2f7d32", width: 2, dash: [6, 4], scale: "v" });
  data.push(d.value);
  function width() { return Math.max(260, Math.min(el.clientWidth, 1100)); }
  var opts = {
    width: width(), height: 280, tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
    series: series,
    axes: [{}, { scale: "n", label: "count" }, { scale: "v", side: 1, label: "value", grid: { show: false } }],
    scales: { x: { time: true } }
  };
  var plot = new uPlot(opts, data, el);
  el.setAttribute("data-ready", "yes");
  window.addEventListener("resize", function () { plot.setSize({ width: width(), height: 280 }); });
})();
