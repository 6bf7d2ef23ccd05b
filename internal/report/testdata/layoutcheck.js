// Appended to a report page by TestHTMLLayoutInChromium: measures the laid
// out page and writes what overlaps or overflows into body[data-layout].
(function () {
  var problems = [];
  function overlap(a, b) {
    var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    return w > 0.5 && h > 0.5;
  }
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var name = svg.getAttribute('aria-label') || 'chart';
    var texts = [];
    svg.querySelectorAll('text').forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.width > 0 && t.textContent.trim() !== '') texts.push({ t: t.textContent.trim(), r: r });
      var box = svg.getBoundingClientRect();
      if (r.width > 0 && (r.left < box.left - 0.5 || r.right > box.right + 0.5)) {
        problems.push(name + ': "' + t.textContent.trim() + '" sticks out of the chart');
      }
    });
    for (var i = 0; i < texts.length; i++) {
      for (var j = i + 1; j < texts.length; j++) {
        if (overlap(texts[i].r, texts[j].r)) {
          problems.push(name + ': "' + texts[i].t + '" overlaps "' + texts[j].t + '"');
        }
      }
    }
  });
  // Tables must fit their box at desktop widths (#tables); narrower, they
  // scroll inside it.
  // The card (the section holding the table) counts, not only the scroll
  // box around it: a table the box scrolls still loses its right columns
  // from a screenshot.
  if (location.hash === '#tables') document.querySelectorAll('table').forEach(function (t) {
    var box = t.parentElement;
    var card = t.closest('section') || box;
    var h = t.querySelector('th');
    var what = 'table (' + (h ? h.textContent.trim() : '?') + ')';
    if (t.scrollWidth > box.clientWidth + 1 || t.getBoundingClientRect().right > box.getBoundingClientRect().right + 1) {
      problems.push(what + ' is ' + t.scrollWidth + ' px wide in ' + box.clientWidth + ' px');
    }
    var c = card.getBoundingClientRect(), r = t.getBoundingClientRect();
    if (r.left + t.scrollWidth > c.right + 1) {
      problems.push(what + ' is wider than its card: ' + t.scrollWidth + ' px from ' + Math.round(r.left - c.left) + ' px in ' + Math.round(c.width) + ' px');
    }
  });
  var root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) {
    problems.push('the page scrolls sideways: ' + root.scrollWidth + ' px in ' + root.clientWidth + ' px');
  }
  document.body.setAttribute('data-layout', JSON.stringify(problems));
})();
