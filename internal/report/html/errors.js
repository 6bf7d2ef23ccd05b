// Script errors are written into the page (#script-errors) so that they are
// visible to a reader and to the report's headless-browser test.
(function () {
  function report(text) {
    var el = document.getElementById('script-errors');
    if (!el) {
      document.addEventListener('DOMContentLoaded', function () { report(text); });
      return;
    }
    el.hidden = false;
    el.textContent += text + '\n';
  }
  window.onerror = function (msg, src, line, col) {
    report('script error: ' + msg + ' (line ' + line + ':' + col + ')');
  };
  var consoleError = console.error;
  console.error = function () {
    report('console.error: ' + Array.prototype.join.call(arguments, ' '));
    consoleError.apply(console, arguments);
  };
  window.reportScriptError = report;
})();
