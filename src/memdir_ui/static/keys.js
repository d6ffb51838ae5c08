// Keyboard: "/" focuses the search box; g then m, r, a or l opens a page.
(function () {
  var pending = false;
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
    if (e.key === "/") { e.preventDefault(); var q = document.getElementById("q"); if (q) q.focus(); return; }
    if (e.key === "g") { pending = true; return; }
    if (pending) {
      pending = false;
      var pages = { m: "/memories", r: "/review", a: "/activity", l: "/recalls" };
      if (pages[e.key]) window.location.href = pages[e.key];
    }
  });
})();
