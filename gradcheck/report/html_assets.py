"""The style sheet and the script of the HTML report, inline in every page.

The script only adds: the page reads the same with JavaScript off. It sorts the table
of cases by the column whose header is clicked (again: the other way), or by the one a
``#sort=KEY`` (``#sort=-KEY``: descending) fragment of the address names at load, and
writes what it did into the ``<body>``'s data attributes: ``data-sorted`` (the key),
``data-images-loaded`` (``"N/M"``: N of the M pictures decoded, once the page has
loaded) and ``data-script`` (``"ran"``), for a browser test to read.

No line here starts with ``::`` nor holds ``##[`` (the page passes through
:func:`gradcheck.report.scrub.neutral`, which would change them)."""

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left;
  vertical-align: top; }
th { background: #f0f0f0; }
#cases th { cursor: pointer; user-select: none; }
#cases th[aria-sort="ascending"]::after { content: " \\25b2"; }
#cases th[aria-sort="descending"]::after { content: " \\25bc"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td[data-key="err"] { white-space: nowrap; }
.passed { color: #1a7f37; } .failed { color: #cf222e; font-weight: bold; }
.approximate { color: #bc4c00; font-weight: bold; }
.error { color: #9a6700; font-weight: bold; } .skipped { color: #777; }
.incomplete { background: #fff3cd; border: 1px solid #e0b000; padding: 0.5em; }
pre { background: #f6f8fa; padding: 0.5em; overflow-x: auto; white-space: pre-wrap; }
.chain { list-style: none; padding-left: 0; display: flex; flex-wrap: wrap; }
.chain li { border: 1px solid #888; border-radius: 4px; padding: 0.1em 0.4em;
  margin: 0.1em; font-family: monospace; }
.chain li + li::before { content: "\\2190  "; color: #888; }
figure { display: inline-block; vertical-align: top; margin: 0.5em 1em 0.5em 0; }
figcaption { font-size: 0.85em; color: #555; max-width: 512px; }
code { font-family: monospace; }
.wide { overflow-x: auto; }
#op-checks td.check { font-size: 0.85em; max-width: 10em; padding: 0.2em 0.35em; }
#op-checks th[scope="col"] { white-space: nowrap; font-size: 0.9em; }
#op-checks th[scope="row"] { font-weight: normal; max-width: 16em; }
#op-checks th.failed, #op-checks th.error { font-weight: bold; }
#op-checks .err { font-size: 0.9em; } #op-checks .err span { white-space: nowrap; }
#op-checks .why { color: #555; }
"""

JS = """
(function () {
  var body = document.body;
  body.dataset.script = "ran";
  var table = document.getElementById("cases");
  function value(row, key) {
    var cell = row.querySelector('td[data-key="' + key + '"]');
    return cell ? cell.getAttribute("data-sort") : "";
  }
  function sortBy(key, descending) {
    if (!table) { return; }
    var tbody = table.tBodies[0];
    var rows = Array.prototype.slice.call(tbody.rows);
    var numeric = rows.every(function (r) {
      var v = value(r, key); return v !== "" && !isNaN(Number(v)); });
    rows.sort(function (a, b) {
      var x = value(a, key), y = value(b, key), c;
      if (numeric) { c = Number(x) - Number(y); }
      else { c = x < y ? -1 : x > y ? 1 : 0; }
      if (c === 0) { c = Number(value(a, "order")) - Number(value(b, "order")); }
      return descending ? -c : c;
    });
    rows.forEach(function (r) { tbody.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.setAttribute("aria-sort", th.dataset.key === key ?
        (descending ? "descending" : "ascending") : "none");
    });
    body.dataset.sorted = (descending ? "-" : "") + key;
  }
  if (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.addEventListener("click", function () {
        sortBy(th.dataset.key, th.getAttribute("aria-sort") === "ascending");
      });
    });
  }
  var m = /^#sort=(-?)([a-z]+)$/.exec(window.location.hash);
  if (m) { sortBy(m[2], m[1] === "-"); }
  function countImages() {
    var images = document.images, loaded = 0;
    for (var i = 0; i < images.length; i++) {
      if (images[i].complete && images[i].naturalWidth > 0) { loaded++; }
    }
    body.dataset.imagesLoaded = loaded + "/" + images.length;
  }
  countImages();
  window.addEventListener("load", countImages);
})();
"""
