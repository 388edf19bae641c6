// Runs first: records every error the page meets so that a test (the #selftest fragment) can
// read them from the DOM.
(function () {
  var errs = [];
  window.__pdqErrors = errs;
  function push(s) { errs.push(String(s).slice(0, 300)); }
  window.addEventListener('error', function (e) {
    var t = e.target;
    if (t && t !== window && (t.src || t.href)) {
      push('resource failed to load: ' + String(t.src || t.href).slice(0, 80));
    } else {
      push('error: ' + e.message + ' at ' + e.filename + ':' + e.lineno);
    }
  }, true);
  window.addEventListener('unhandledrejection', function (e) { push('unhandled rejection: ' + e.reason); });
  document.addEventListener('securitypolicyviolation', function (e) {
    push('blocked by content security policy: ' + e.violatedDirective + ' ' + e.blockedURI);
  });
  var orig = console.error;
  console.error = function () {
    push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return orig.apply(console, arguments);
  };
})();
