// Refreshes the live part of the status page in place (the page works without this script; it then reloads itself).
(function () {
  "use strict";
  var INTERVAL_MS = 2000;
  var live = document.getElementById("live");
  var state = document.getElementById("live-state");
  if (!live || !window.fetch) return;
  var noscriptRefresh = document.querySelector("noscript");
  if (noscriptRefresh) noscriptRefresh.remove();

  function openFailures() {
    var ids = {};
    live.querySelectorAll("details[open]").forEach(function (d) { ids[d.dataset.id] = true; });
    return ids;
  }

  function refresh() {
    fetch("status?part=live", { cache: "no-store", credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        var open = openFailures();
        live.innerHTML = html;
        live.querySelectorAll("details").forEach(function (d) { if (open[d.dataset.id]) d.open = true; });
        state.textContent = "live";
        state.className = "meta ok";
      })
      .catch(function (err) {
        state.textContent = "not updating (" + err.message + ")";
        state.className = "meta bad";
      })
      .finally(function () { window.setTimeout(refresh, INTERVAL_MS); });
  }
  window.setTimeout(refresh, INTERVAL_MS);
})();
