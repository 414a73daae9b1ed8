// Jobconsole's only script (the CSP allows no inline script): time zone, live ages, polling rules, charts.
(function () {
  "use strict";

  // The operator's time zone, for the server to render exact times in (dashboards/operator_time.py). A page
  // its request rendered without the cookie, in another zone (the first one after a login), is fetched again
  // once: by then the cookie is set, and it is not asked again, so a zone the server lacks cannot loop.
  var zone = (Intl.DateTimeFormat().resolvedOptions() || {}).timeZone;
  if (zone && document.cookie.indexOf("jc_tz=" + zone) === -1) {
    document.cookie = "jc_tz=" + zone + "; path=/; max-age=31536000; samesite=lax";
    var rendered = document.documentElement.getAttribute("data-zone");
    if (rendered && rendered !== zone && document.cookie.indexOf("jc_tz=" + zone) !== -1) {
      window.location.replace(window.location.href);  // a GET, never a form posted again
    }
  }

  // Relative ages ("3 min ago") stay current without asking the server.
  function relative(seconds) {
    var s = Math.abs(seconds);
    if (s < 1) return "just now";
    if (s < 60) return Math.floor(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) {
      var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
      return h < 10 && m ? h + " h " + m + " min" : h + " h";
    }
    return Math.floor(s / 86400) + " d";
  }
  function refreshAges(root) {
    (root || document).querySelectorAll("time[data-age]").forEach(function (el) {
      var seconds = (Date.now() - Date.parse(el.getAttribute("datetime"))) / 1000;
      var text = relative(seconds);
      el.textContent = text === "just now" ? text : seconds < 0 ? "in " + text : text + " ago";
    });
  }
  setInterval(refreshAges, 15000);

  // Poll only what the operator can see: no requests while the tab is hidden or a live part is off-screen.
  function onScreen(el) {
    var r = el.getBoundingClientRect();
    return r.bottom > 0 && r.top < (window.innerHeight || document.documentElement.clientHeight);
  }
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var el = evt.detail.elt;
    if (el && el.classList && el.classList.contains("live") && (document.hidden || !onScreen(el))) {
      evt.preventDefault();
    }
  });

  // Forms that change many things ask first (they work without JavaScript too: the server re-checks).
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) evt.preventDefault();
  });

  // Charts: figures come as JSON beside their <div> (json_script); colours follow the page's theme.
  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }
  function drawCharts(root) {
    if (!window.Plotly) return;
    (root || document).querySelectorAll(".chart[data-figure]").forEach(function (div) {
      var source = document.getElementById(div.getAttribute("data-figure"));
      if (!source) return;
      var figure = JSON.parse(source.textContent);
      var text = cssVar("--text"), line = cssVar("--line"), muted = cssVar("--muted");
      var data = figure.data || [];
      // Time charts get margins sized for what they hold (two-line date ticks, under them the legend plotly shows
      // for more than one trace, y labels such as "0.0008" beside their title) rather than plotly's automargin,
      // which draws a chart twice (once to measure, again with the margins found): half the overview's drawing
      // time. A histogram's category axis (bucket names of any length, rotated) keeps automargin.
      var time = !!(figure.layout && figure.layout.xaxis && figure.layout.xaxis.type === "date");
      var margin = time ? { l: 56, r: 12, t: 16, b: data.length > 1 ? 72 : 44 } : { l: 48, r: 12, t: 8, b: 36 };
      var layout = Object.assign({
        paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
        font: { color: text, family: "system-ui, sans-serif", size: 12 },
        margin: margin, hovermode: "x unified",
        // The legend sits at the bottom of the chart's box, below the axis's labels: a legend placed under the
        // plot overlapped the date line of the time axis, and long tick labels ran into the axis title (seen in
        // the browser tests' screenshots).
        legend: { orientation: "h", yref: "container", y: 0, yanchor: "bottom", font: { color: muted } },
      }, figure.layout || {});
      ["xaxis", "yaxis", "yaxis2"].forEach(function (axis) {
        if (axis === "yaxis2" && !layout.yaxis2) return;
        layout[axis] = Object.assign({ gridcolor: line, zerolinecolor: line, linecolor: line, automargin: !time }, layout[axis] || {});
      });
      // The toolbar covered the newest data (top right) on every chart: it shows only while the pointer is over a
      // chart, and never on a phone (no hover there: a tap showed it over the data).
      var phone = window.matchMedia("(max-width: 640px)").matches;
      window.Plotly.react(div, data, layout, {
        displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"],
        displayModeBar: phone ? false : "hover",
      });
    });
  }
  // On a phone the navigation folds behind a Menu button (console.css shows the button below 861 px only).
  function foldNavigation() {
    var sidebar = document.querySelector(".sidebar"), toggle = sidebar && sidebar.querySelector(".nav-toggle");
    if (!toggle) return;
    toggle.hidden = false;
    sidebar.classList.add("foldable");
    toggle.addEventListener("click", function () {
      var open = sidebar.classList.toggle("nav-open");
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
    });
  }

  // On a phone a table's rows stack, each cell under its column's name: the names come from the header, put on
  // each cell as data-label for console.css (a cell spanning columns, an empty row's message, gets none).
  function labelCells(root) {
    (root || document).querySelectorAll("main table").forEach(function (table) {
      var heads = table.tHead ? table.tHead.rows[0] : null;
      if (!heads) return;
      var names = [];
      Array.prototype.forEach.call(heads.cells, function (th) {
        for (var i = 0; i < (th.colSpan || 1); i++) names.push(th.textContent.trim());
      });
      Array.prototype.forEach.call(table.tBodies, function (body) {
        Array.prototype.forEach.call(body.rows, function (row) {
          var column = 0;
          Array.prototype.forEach.call(row.cells, function (td) {
            if ((td.colSpan || 1) === 1 && names[column]) td.setAttribute("data-label", names[column]);
            column += td.colSpan || 1;
          });
        });
      });
      table.classList.add("stacks");
    });
  }

  document.addEventListener("DOMContentLoaded", function () { foldNavigation(); labelCells(); drawCharts(); refreshAges(); });
  document.addEventListener("htmx:afterSettle", function (evt) {
    labelCells(evt.detail.elt); drawCharts(evt.detail.elt); refreshAges(evt.detail.elt);
  });
})();
