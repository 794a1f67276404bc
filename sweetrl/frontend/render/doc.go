// Package render turns HTML into a full-page PNG screenshot in a real
// browser, offline: Debian's chromium, headless, driven over the DevTools
// protocol with chromedp.
//
// It renders ColBench frontend pages as the SWEET-RL reference does (a full
// page screenshot of the document at the reference browser's default
// viewport, 1366×768 CSS pixels) with no network access: every request the
// page makes is intercepted and failed, except for two local replacements.
// A Tailwind stylesheet or the Tailwind play script that the page links is
// replaced by the CSS of the page's classes, compiled offline with the
// Tailwind CSS v3 command-line tool (see [Tailwind]); an image from
// picsum.photos becomes a deterministic placeholder of the requested size
// (see [Placeholder]). Scores from this render can therefore differ from an
// online render of the same page.
//
// A [Renderer] holds one browser and a pool of tabs. A page that does not
// finish within the timeout is abandoned, its tab closed, and it fails; the
// caller scores it as the reference scores a failed render, with [BlackPNG].
// A browser that dies is started again, and Close leaves no process behind.
package render
