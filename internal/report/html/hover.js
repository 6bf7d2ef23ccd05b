// Hover read-out: the values of the chart column under the pointer, from
// the data-series attribute each time chart carries.
(function () {
  var tip = document.getElementById('tip');
  function si(v, unit) {
    var units = { bps: 'bit/s', pps: 'pps' };
    var u = units[unit] || unit;
    if (!units[unit] && Math.abs(v) < 1e6) { return Math.round(v).toLocaleString('en-US') + ' ' + u; }
    var p = [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < p.length; i++) {
      if (Math.abs(v) >= p[i][0]) { return (v / p[i][0]).toPrecision(3) + ' ' + p[i][1] + u; }
    }
    return (v === 0 ? '0' : v.toPrecision(3)) + ' ' + u;
  }
  function show(svg, d, clientX, pageX, pageY) {
    var box = svg.getBoundingClientRect();
    var x = (clientX - box.left) / box.width * svg.viewBox.baseVal.width;
    var n = d.series.length ? d.series[0].values.length : 0;
    var i = Math.floor((x - d.left) / d.width * n);
    var line = svg.querySelector('.hover');
    if (n === 0 || i < 0 || i >= n) { hide(svg); return false; }
    var cx = d.left + (i + 0.5) * d.width / n;
    line.setAttribute('x1', cx); line.setAttribute('x2', cx); line.setAttribute('visibility', 'visible');
    var from = d.x0 + i * (d.x1 - d.x0) / n, to = d.x0 + (i + 1) * (d.x1 - d.x0) / n;
    var dec = Math.max(0, Math.min(6, Math.ceil(-Math.log10(Math.max(to - from, 1e-9))) + 1));
    var text = '+' + from.toFixed(dec) + ' s to +' + to.toFixed(dec) + ' s';
    d.series.forEach(function (s) { text += '\n' + s.name + ': ' + si(s.values[i], d.unit); });
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = (pageX + 14) + 'px';
    tip.style.top = (pageY + 14) + 'px';
    return true;
  }
  function hide(svg) {
    tip.hidden = true;
    svg.querySelector('.hover').setAttribute('visibility', 'hidden');
  }
  var charts = document.querySelectorAll('svg.chart[data-series]');
  charts.forEach(function (svg) {
    var d = JSON.parse(svg.getAttribute('data-series'));
    svg.addEventListener('mousemove', function (ev) { show(svg, d, ev.clientX, ev.pageX, ev.pageY); });
    svg.addEventListener('mouseleave', function () { hide(svg); });
  });
  // #selftest: hover the middle of every chart once, so that a headless
  // browser exercises this code; a read-out that stays empty is an error.
  if (location.hash === '#selftest') {
    charts.forEach(function (svg, k) {
      var d = JSON.parse(svg.getAttribute('data-series'));
      var box = svg.getBoundingClientRect();
      var clientX = box.left + box.width * (d.left + d.width / 2) / svg.viewBox.baseVal.width;
      if (!show(svg, d, clientX, 0, 0) || tip.textContent.split('\n').length < 2) {
        window.reportScriptError('selftest: chart ' + k + ' shows no values under the pointer');
      }
      hide(svg);
    });
    document.body.setAttribute('data-selftest', 'done ' + charts.length);
  }
})();
