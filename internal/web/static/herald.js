// Herald's pages work without this file; it only adds conveniences.
// No inline scripts: the Content-Security-Policy allows scripts from this
// origin only.
(function () {
  "use strict";
  // A form, or the button that sends it, marked data-confirm asks before
  // it is sent.
  document.addEventListener("submit", function (e) {
    var b = e.submitter;
    var msg = (b && b.getAttribute("data-confirm")) || (e.target.getAttribute && e.target.getAttribute("data-confirm"));
    if (msg && !window.confirm(msg)) { e.preventDefault(); }
  });
  // A checkbox marked data-select-all ticks every checkbox of its form
  // named by its value.
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (!t.hasAttribute || !t.hasAttribute("data-select-all")) { return; }
    var boxes = t.form ? t.form.querySelectorAll('input[type=checkbox][name="' + t.value + '"]') : [];
    for (var i = 0; i < boxes.length; i++) { boxes[i].checked = t.checked; }
  });
})();
