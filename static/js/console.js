/* Keyboard navigation and deep links. Pages mark what j/k steps through with data-nav
   (diff changes, list rows); n/p follow the page's rel="next"/rel="prev" links (next run, next page);
   "?" lists the shortcuts, "/" goes to the search box. */
(function () {
  "use strict";

  function typing(event) {
    var t = event.target;
    return event.altKey || event.ctrlKey || event.metaKey ||
      (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)));
  }

  function visible(el) {
    return el.offsetParent !== null || el.getClientRects().length > 0;
  }

  function step(delta) {
    var items = Array.prototype.filter.call(document.querySelectorAll("[data-nav]"), visible);
    if (!items.length) return;
    var current = document.querySelector("[data-nav].nav-current");
    var index = items.indexOf(current);
    var next = items[index < 0 ? (delta > 0 ? 0 : items.length - 1) : Math.min(Math.max(index + delta, 0), items.length - 1)];
    if (current) current.classList.remove("nav-current");
    next.classList.add("nav-current");
    if (!next.hasAttribute("tabindex")) next.setAttribute("tabindex", "-1");
    next.focus({ preventScroll: true });
    next.scrollIntoView({ block: "center" });
    if (next.id && history.replaceState) history.replaceState(null, "", "#" + next.id);
  }

  function follow(rel) {
    var link = document.querySelector('a[rel~="' + rel + '"]');
    if (link) link.click();
  }

  function open() {
    var current = document.querySelector("[data-nav].nav-current");
    var link = current && (current.matches("a[href]") ? current : current.querySelector("a[href]"));
    if (link) link.click();
  }

  /* "?" shows the shortcuts (a <dialog> every page carries); "/" goes to the page's first search box */
  function toggleHelp() {
    var help = document.getElementById("keyboard-help");
    if (!help || !help.showModal) return;
    if (help.open) help.close(); else help.showModal();
  }

  function focusSearch() {
    var box = Array.prototype.filter.call(document.querySelectorAll('main input[type="search"]'), visible)[0];
    if (!box) return false;
    box.focus();
    box.select();
    return true;
  }

  document.addEventListener("click", function (event) {
    if (event.target && event.target.closest && event.target.closest("[data-keyboard-help]")) toggleHelp();
  });

  /* a form with data-confirm="question" is sent only when the question is answered yes */
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form && form.matches && form.matches("form[data-confirm]") && !window.confirm(form.getAttribute("data-confirm"))) {
      event.preventDefault();
    }
  });

  document.addEventListener("keydown", function (event) {
    var help = document.getElementById("keyboard-help");
    if (event.key === "?" && help && help.open) { help.close(); event.preventDefault(); return; }
    if (typing(event)) return;
    switch (event.key) {
      case "j": step(1); break;
      case "k": step(-1); break;
      case "n": follow("next"); break;
      case "p": follow("prev"); break;
      case "Enter": if (document.activeElement && document.activeElement.matches("[data-nav]")) open(); else return; break;
      case "?": toggleHelp(); break;
      case "/": if (!focusSearch()) return; break;
      default: return;
    }
    event.preventDefault();
  });

  /* a "select all" box (data-pick-all="NAME") ticks every checkbox called NAME of its form */
  /* "mentioning me" looks at every status (a confirmed case's thread goes on): ticking it widens an "open"
     status filter to "all" before the form is sent (capture phase: before htmx sees the change) */
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-widen-status]") || !box.checked || !box.form) return;
    var status = box.form.querySelector('select[name="status"]');
    if (status && status.value === "open") status.value = "all";
  }, true);

  function picks(all) {
    var form = all.getAttribute("form");
    var selector = 'input[type="checkbox"][name="' + all.dataset.pickAll + '"]' + (form ? '[form="' + form + '"]' : "");
    return Array.prototype.slice.call(document.querySelectorAll(selector));
  }
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches) return;
    if (box.matches("[data-pick-all]")) {
      picks(box).forEach(function (other) { other.checked = box.checked; });
      return;
    }
    /* ticking rows one by one: the "select all" box shows all, none or some (indeterminate) */
    Array.prototype.forEach.call(document.querySelectorAll("[data-pick-all]"), function (all) {
      var boxes = picks(all);
      if (boxes.indexOf(box) < 0) return;
      var ticked = boxes.filter(function (b) { return b.checked; }).length;
      all.checked = ticked === boxes.length;
      all.indeterminate = ticked > 0 && ticked < boxes.length;
    });
  });

  /* a deep link into a collapsed <details> opens it */
  function reveal() {
    if (!location.hash) return;
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) return;
    for (var el = target; el; el = el.parentElement) {
      if (el.tagName === "DETAILS") el.open = true;
    }
    target.classList.add("targeted");
    target.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", reveal);

  /* an htmx request that failed (server error, 403, network down) says so instead of doing nothing */
  function failed(text) {
    var box = document.getElementById("request-error");
    if (!box) return;
    box.textContent = text;
    box.hidden = false;
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    failed((document.documentElement.dataset.errorPrefix || "Request failed") + " (" + xhr.status + "): " +
      (xhr.status === 403 ? (document.documentElement.dataset.error403 || "") : (document.documentElement.dataset.errorRetry || "")));
  });
  document.addEventListener("htmx:sendError", function () {
    failed(document.documentElement.dataset.errorOffline || "The server did not answer.");
  });
  document.addEventListener("htmx:beforeRequest", function () {
    var box = document.getElementById("request-error");
    if (box) box.hidden = true;
  });
  document.addEventListener("DOMContentLoaded", reveal);

  /* selecting text inside [data-quotable] (a summary, drift evidence) quotes it into the page's
     [data-quote-target] field: the passage a drift case or a comment is about */
  function quoteSelection() {
    var selection = window.getSelection();
    var text = selection ? selection.toString().trim() : "";
    if (!text || !selection.anchorNode) return;
    var node = selection.anchorNode.nodeType === 1 ? selection.anchorNode : selection.anchorNode.parentElement;
    if (!node || !node.closest("[data-quotable]")) return;
    var field = document.querySelector("[data-quote-target]");
    if (!field) return;
    field.value = text;
    for (var el = field; el; el = el.parentElement) {
      if (el.tagName === "DETAILS") el.open = true;
    }
    field.dispatchEvent(new Event("change", { bubbles: true }));
  }
  document.addEventListener("mouseup", quoteSelection);
  document.addEventListener("keyup", function (event) { if (event.shiftKey) quoteSelection(); });

  /* behaviour that would otherwise be inline script, which the Content-Security-Policy refuses:
     a <select data-autosubmit> submits its form on change; a link with data-remove-closest="selector"
     removes that ancestor (closing a panel htmx opened) instead of navigating */
  document.addEventListener("change", function (event) {
    var t = event.target;
    if (t && t.matches && t.matches("select[data-autosubmit]") && t.form) t.form.submit();
  });
  document.addEventListener("click", function (event) {
    var link = event.target && event.target.closest && event.target.closest("[data-remove-closest]");
    if (!link) return;
    var box = link.closest(link.getAttribute("data-remove-closest"));
    if (!box) return;
    event.preventDefault();
    box.remove();
  });
})();
