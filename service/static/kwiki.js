// kwiki search page: small conveniences only; every feature works without JavaScript.
document.addEventListener("DOMContentLoaded", () => {
  // A changed filter re-runs the current query.
  for (const select of document.querySelectorAll("select.autosubmit")) {
    select.addEventListener("change", () => {
      const q = document.getElementById("q");
      if (q && q.value.trim()) select.form.submit();
    });
  }
  // "/" focuses the query box, as on most search pages.
  document.addEventListener("keydown", (e) => {
    const q = document.getElementById("q");
    if (e.key === "/" && q && document.activeElement !== q) { e.preventDefault(); q.focus(); q.select(); }
  });
  // Diagnosis of a large export takes a moment: say so.
  const form = document.getElementById("diagnose-form");
  if (form) form.addEventListener("submit", () => {
    form.classList.add("busy");
    const b = document.getElementById("diagnose-button");
    if (b) b.textContent = "Diagnosing…";
  });
});
