// Click (or Enter on) a column header of a table.sortable to sort by it: ascending first, then
// descending. Numeric cells sort by their data-v attribute; "inf" sorts last.
(function () {
  function cellKey(td, numeric) {
    var v = td.getAttribute('data-v');
    if (v === null) v = td.textContent;
    if (!numeric) return v;
    if (v === 'inf') return Infinity;
    if (v === '-inf') return -Infinity;
    var f = parseFloat(v);
    return isNaN(f) ? Infinity : f;
  }
  function sortTable(table, th) {
    var col = th.cellIndex;
    var numeric = th.getAttribute('data-type') === 'num';
    var dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var keyed = rows.map(function (r, i) { return { r: r, k: cellKey(r.cells[col], numeric), i: i }; });
    keyed.sort(function (a, b) {
      if (a.k < b.k) return -dir;
      if (a.k > b.k) return dir;
      return a.i - b.i;
    });
    keyed.forEach(function (x) { body.appendChild(x.r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.tabIndex = 0;
      th.addEventListener('click', function () { sortTable(table, th); });
      th.addEventListener('keydown', function (e) {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortTable(table, th); }
      });
    });
  });

  // #selftest: click headers of the first sortable table and write what happened, with the
  // errors seen, into #pdq-selftest for a headless browser's DOM dump.
  window.addEventListener('load', function () {
    if (location.hash !== '#selftest') return;
    var out = { errors: window.__pdqErrors || ['error capture missing'], steps: [], images: [] };
    var table = document.querySelector('table.sortable');
    function first() {
      var r = table && table.tBodies[0].rows[0];
      return r ? r.getAttribute('data-name') : null;
    }
    if (table) {
      out.table = table.id;
      out.initial = first();
      var heads = table.tHead.rows[0].cells;
      ['name', 'sqnr'].forEach(function (key) {
        var th = null;
        Array.prototype.forEach.call(heads, function (h) { if (h.getAttribute('data-key') === key) th = h; });
        for (var n = 0; n < 2; n++) {
          if (!th) { out.steps.push({ key: key, missing: true }); break; }
          th.click();
          out.steps.push({ key: key, sort: th.getAttribute('aria-sort'), first: first() });
        }
      });
    }
    Array.prototype.forEach.call(document.images, function (img) {
      out.images.push({ ok: img.complete && img.naturalWidth > 0, width: img.naturalWidth, height: img.naturalHeight });
    });
    var pre = document.getElementById('pdq-selftest');
    pre.textContent = JSON.stringify(out);
    pre.hidden = false;
  });
})();
