package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Reference viewport: the SWEET-RL reference renders with headless Firefox
// through Selenium and sets no window size, so pages lay out in Firefox's
// default headless window, 1366×768, and the full-page screenshot is as wide
// as that viewport (or the page, when wider) and as tall as the document.
const (
	DefaultWidth  = 1366
	DefaultHeight = 768
)

// BlackSide is the side of the reference's image for a failed render: the
// reference scores an answer it could not render as a 224×224 black image
// (CLIP's input size, so any black image embeds the same).
const BlackSide = 224

// ErrPageFailed is wrapped by the error of a page that did not render: it
// timed out, crashed its tab, or could not be captured. Such a page scores
// as [BlackPNG].
var ErrPageFailed = errors.New("page did not render")

// Options configure a Renderer. The zero value asks for the defaults.
type Options struct {
	// Chromium is the browser executable; default "chromium" on PATH.
	Chromium string
	// TailwindCLI is the tailwindcss executable; default FindTailwindCLI.
	TailwindCLI string
	// NoTailwind renders pages without compiling Tailwind: their Tailwind
	// links are then blocked like any other request.
	NoTailwind bool
	// Tabs is how many pages render at once; default 1.
	Tabs int
	// Timeout bounds one page, from navigation to screenshot, and the
	// opening of a tab for it; default 20s.
	Timeout time.Duration
	// Width and Height are the viewport in CSS pixels; default 1366×768.
	Width, Height int
	// MaxHeight caps the height of a full-page screenshot in CSS pixels;
	// default 16384. A taller page is cut.
	MaxHeight int
}

func (o Options) withDefaults() Options {
	if o.Chromium == "" {
		o.Chromium = "chromium"
	}
	if o.Tabs <= 0 {
		o.Tabs = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Second
	}
	if o.Width <= 0 {
		o.Width = DefaultWidth
	}
	if o.Height <= 0 {
		o.Height = DefaultHeight
	}
	if o.MaxHeight <= 0 {
		o.MaxHeight = 16384
	}
	return o
}

// Renderer renders HTML pages to PNG in one headless browser with a pool of
// tabs. Its methods are safe for concurrent use.
type Renderer struct {
	opts Options
	tw   *Tailwind // nil with NoTailwind

	mu      sync.Mutex // guards b and closed
	b       *browser   // the running browser; nil before the first page and after a death
	closed  bool
	pool    chan *tab      // Tabs slots; a nil slot opens a new tab when taken
	closing sync.WaitGroup // tabs being closed in the background
	seq     atomic.Uint64  // numbers pages, so each has its own origin

	cacheMu sync.Mutex
	cache   map[[32]byte]string // page → page with Tailwind inlined

	phMu         sync.Mutex
	placeholders map[string][]byte // URL → placeholder PNG
}

// cacheLimit bounds the compiled-page and placeholder caches; a full cache
// is emptied.
const cacheLimit = 512

// New checks that the browser and the Tailwind CLI exist and returns a
// Renderer; the browser starts with the first page.
func New(opts Options) (*Renderer, error) {
	opts = opts.withDefaults()
	if _, err := exec.LookPath(opts.Chromium); err != nil {
		return nil, fmt.Errorf("render: browser %q: %w (scripts/setup.sh installs Debian's chromium)", opts.Chromium, err)
	}
	r := &Renderer{
		opts:         opts,
		pool:         make(chan *tab, opts.Tabs),
		cache:        make(map[[32]byte]string),
		placeholders: make(map[string][]byte),
	}
	if !opts.NoTailwind {
		cli := opts.TailwindCLI
		if cli == "" {
			var err error
			if cli, err = FindTailwindCLI(); err != nil {
				return nil, err
			}
		}
		tw, err := NewTailwind(cli)
		if err != nil {
			return nil, err
		}
		r.tw = tw
	}
	for range opts.Tabs {
		r.pool <- nil
	}
	return r, nil
}

// Options returns the options in use, defaults filled in.
func (r *Renderer) Options() Options { return r.opts }

// Close closes every tab and the browser, and kills what is left of the
// browser's process group. The Renderer is unusable afterwards.
func (r *Renderer) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	b := r.b
	r.b = nil
	r.mu.Unlock()
	r.closing.Wait()
	if b != nil {
		b.stop()
	}
	return nil
}

// Render renders one page and returns its full-page screenshot as PNG. A
// page that fails gives an error wrapping ErrPageFailed; other errors (no
// browser, Tailwind failing, ctx done) concern the Renderer, not the page.
func (r *Renderer) Render(ctx context.Context, html string) ([]byte, error) {
	page, err := r.prepare(ctx, html)
	if err != nil {
		return nil, err
	}
	return r.renderPrepared(ctx, page)
}

// Page is the outcome of one page of a batch.
type Page struct {
	PNG []byte // the screenshot; nil when Err is set
	Err error  // why the page did not render
}

// Image returns the page's PNG, or BlackPNG when it failed, as the reference
// scores a failed render.
func (p Page) Image() []byte {
	if p.Err != nil {
		return BlackPNG()
	}
	return p.PNG
}

// RenderAll renders pages on all tabs and returns one Page per page, in
// order. The Tailwind classes of all pages are compiled in one run per
// flavour. It returns an error only when the batch cannot go on (ctx done,
// Tailwind failing, the browser not starting); a page that fails is reported
// in its Page and the batch goes on.
func (r *Renderer) RenderAll(ctx context.Context, pages []string) ([]Page, error) {
	prepared, err := r.prepareAll(ctx, pages)
	if err != nil {
		return nil, err
	}
	out := make([]Page, len(pages))
	var (
		wg       sync.WaitGroup
		next     atomic.Int64
		stop     atomic.Bool // a worker met an error that ends the batch
		fatalMu  sync.Mutex
		fatalErr error
	)
	for range r.opts.Tabs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(prepared) || ctx.Err() != nil || stop.Load() {
					return
				}
				png, err := r.renderPrepared(ctx, prepared[i])
				if err != nil && !errors.Is(err, ErrPageFailed) {
					fatalMu.Lock()
					if fatalErr == nil {
						fatalErr = err
					}
					fatalMu.Unlock()
					stop.Store(true)
					return
				}
				out[i] = Page{PNG: png, Err: err}
			}
		}()
	}
	wg.Wait()
	if fatalErr != nil {
		return nil, fatalErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("render: batch of %d pages: %w", len(pages), err)
	}
	return out, nil
}

// prepare inlines the compiled Tailwind of one page, from the cache when the
// same page was prepared before.
func (r *Renderer) prepare(ctx context.Context, html string) (string, error) {
	if r.tw == nil {
		return html, nil
	}
	key := sha256.Sum256([]byte(html))
	r.cacheMu.Lock()
	p, ok := r.cache[key]
	r.cacheMu.Unlock()
	if ok {
		return p, nil
	}
	ps, err := r.prepareAll(ctx, []string{html})
	if err != nil {
		return "", err
	}
	r.cacheMu.Lock()
	if len(r.cache) >= cacheLimit {
		clear(r.cache)
	}
	r.cache[key] = ps[0]
	r.cacheMu.Unlock()
	return ps[0], nil
}

// prepareAll inlines compiled Tailwind into every page that links it, with
// one compilation per flavour.
func (r *Renderer) prepareAll(ctx context.Context, pages []string) ([]string, error) {
	out := make([]string, len(pages))
	copy(out, pages)
	if r.tw == nil {
		return out, nil
	}
	groups := map[Flavor][]int{}
	for i, p := range pages {
		if f := DetectTailwind(p); f != NoTailwind {
			groups[f] = append(groups[f], i)
		}
	}
	for _, f := range []Flavor{TailwindV2, TailwindV3} {
		idx := groups[f]
		if len(idx) == 0 {
			continue
		}
		sub := make([]string, len(idx))
		for j, i := range idx {
			sub[j] = pages[i]
		}
		css, err := r.tw.Compile(ctx, f, sub)
		if err != nil {
			return nil, err
		}
		for _, i := range idx {
			out[i] = InlineTailwind(pages[i], css)
		}
	}
	return out, nil
}

// renderPrepared renders a page whose Tailwind is inlined, on a tab of the
// pool. A page that fails because the browser died, or stopped answering, is
// tried once more on a new browser.
func (r *Renderer) renderPrepared(ctx context.Context, html string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		t, err := r.takeTab(ctx)
		if err != nil {
			return nil, err
		}
		png, err := t.render(ctx, html, r.seq.Add(1))
		if err == nil {
			r.pool <- t
			return png, nil
		}
		// The tab is not reused after a failure: close it in the
		// background and leave an empty slot.
		r.discardTab(t)
		r.pool <- nil
		if ctx.Err() != nil {
			return nil, fmt.Errorf("render: %w", ctx.Err())
		}
		if t.b.died() || !t.b.answers() {
			r.browserDied(t.b)
			if attempt == 0 {
				continue
			}
		}
		return nil, fmt.Errorf("render: %w: %w", ErrPageFailed, err)
	}
}

// takeTab takes a slot of the pool, opening a tab (and starting the browser)
// when the slot is empty or its tab belongs to a browser that died. A
// browser that dies, or stops answering, while the tab opens is replaced
// once.
func (r *Renderer) takeTab(ctx context.Context) (*tab, error) {
	var t *tab
	select {
	case t = <-r.pool:
	case <-ctx.Done():
		return nil, fmt.Errorf("render: waiting for a tab: %w", ctx.Err())
	}
	b, err := r.browser()
	if err != nil {
		r.pool <- t
		return nil, err
	}
	if t != nil && t.b == b && b.alive() {
		return t, nil
	}
	if t != nil {
		r.discardTab(t)
	}
	for attempt := 0; ; attempt++ {
		t, err = b.newTab(ctx, r)
		if err == nil {
			return t, nil
		}
		if ctx.Err() != nil || attempt > 0 || !(errors.Is(err, errBrowserHung) || b.died()) {
			r.pool <- nil
			return nil, fmt.Errorf("render: opening a tab: %w", err)
		}
		r.browserDied(b) // dead or hung: stopped, its other tabs' pages retried on the next
		if b, err = r.browser(); err != nil {
			r.pool <- nil
			return nil, err
		}
	}
}

// discardTab closes t in the background; Close waits for it.
func (r *Renderer) discardTab(t *tab) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		// Close has stopped, or is stopping, the browser.
		go t.cancel()
		return
	}
	r.closing.Add(1)
	go func() {
		defer r.closing.Done()
		t.close()
	}()
}

// browser returns the running browser, starting one when there is none.
func (r *Renderer) browser() (*browser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("render: Renderer is closed")
	}
	if r.b != nil {
		return r.b, nil
	}
	b, err := startBrowser(r.opts)
	if err != nil {
		return nil, err
	}
	r.b = b
	return b, nil
}

// browserDied forgets b, a browser that exited or stopped answering, and
// kills what is left of it; the next page starts a new one.
func (r *Renderer) browserDied(b *browser) {
	r.mu.Lock()
	if r.b == b {
		r.b = nil
	}
	r.mu.Unlock()
	b.kill()
}

// placeholder returns the placeholder PNG for url, from the cache when it
// was made before.
func (r *Renderer) placeholder(url string) ([]byte, bool) {
	r.phMu.Lock()
	p, ok := r.placeholders[url]
	r.phMu.Unlock()
	if ok {
		return p, true
	}
	p, ok = Placeholder(url)
	if !ok {
		return nil, false
	}
	r.phMu.Lock()
	if len(r.placeholders) >= cacheLimit {
		clear(r.placeholders)
	}
	r.placeholders[url] = p
	r.phMu.Unlock()
	return p, true
}

// BlackPNG returns the image the reference scores a failed render with: a
// BlackSide×BlackSide black PNG.
func BlackPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, BlackSide, BlackSide)) // [224][224] RGBA
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic("render: encoding the black PNG in memory: " + err.Error())
	}
	return buf.Bytes()
}

// browser is one running browser process.
type browser struct {
	opts        Options
	allocCancel context.CancelFunc
	ctx         context.Context // the browser's chromedp context
	cancel      context.CancelFunc
	pid         int    // also its process group id
	dir         string // its user data directory, named by every process it starts
	stopOnce    sync.Once
}

// browserFlags are the command-line flags beyond chromedp's defaults.
func browserFlags(opts Options) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(opts.Chromium),
		chromedp.WindowSize(opts.Width, opts.Height),
		chromedp.DisableGPU,
		// Pop-ups are blocked unless a user gesture opened them.
		chromedp.Flag("disable-popup-blocking", false),
		// Defence in depth behind the request interception: no name
		// resolves, and anything else goes to a proxy that does not exist,
		// loopback included.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"),
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			// Its own process group, so that Close can kill every
			// process of the browser at once; and killed with us.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		}),
	}
}

func startBrowser(opts Options) (*browser, error) {
	dir, err := os.MkdirTemp("", "turnwise-chromium-")
	if err != nil {
		return nil, fmt.Errorf("render: starting %s: %w", opts.Chromium, err)
	}
	flags := append(chromedp.DefaultExecAllocatorOptions[:], browserFlags(opts)...)
	flags = append(flags, chromedp.UserDataDir(dir))
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), flags...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{opts: opts, allocCancel: allocCancel, ctx: ctx, cancel: cancel, dir: dir}
	// The first action starts the browser, bound to the context it runs
	// with: run it with ctx itself, and cancel ctx if it takes too long.
	timer := time.AfterFunc(60*time.Second, cancel)
	err = chromedp.Do(ctx)
	timer.Stop()
	if err != nil {
		b.stop()
		return nil, fmt.Errorf("render: starting %s: %w", opts.Chromium, err)
	}
	c := chromedp.FromContext(ctx)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		b.stop()
		return nil, fmt.Errorf("render: starting %s: no browser process", opts.Chromium)
	}
	b.pid = c.Browser.Process().Pid
	// Close any window a page opens despite the pop-up blocker.
	if err := chromedp.ListenBrowser(ctx, func(ev any) {
		if e, ok := ev.(*target.EventTargetCreated); ok && e.TargetInfo != nil && e.TargetInfo.OpenerID != "" {
			id := e.TargetInfo.TargetID
			go func() {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				defer ccancel()
				chromedp.CallBrowser(cctx, target.CloseTarget, target.CloseTargetParams{TargetID: id})
			}()
		}
	}); err != nil {
		b.stop()
		return nil, fmt.Errorf("render: starting %s: %w", opts.Chromium, err)
	}
	start, startCancel := context.WithTimeout(ctx, 30*time.Second)
	defer startCancel()
	if _, err := chromedp.CallBrowser(start, target.SetDiscoverTargets, target.SetDiscoverTargetsParams{Discover: true}); err != nil {
		b.stop()
		return nil, fmt.Errorf("render: starting %s: %w", opts.Chromium, err)
	}
	return b, nil
}

// alive reports whether the browser process still runs (a zombie does not).
func (b *browser) alive() bool {
	if b.ctx.Err() != nil || b.pid <= 0 {
		return false
	}
	st := processState(b.pid)
	return st != 0 && st != 'Z' && st != 'X'
}

// died reports whether the browser is dead or dies within a short while:
// a page or a tab that failed because the browser was killed can notice
// before the process is gone.
func (b *browser) died() bool {
	deadline := time.Now().Add(500 * time.Millisecond)
	for b.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// answers reports whether the browser answers a command (Browser.getVersion)
// within a few seconds: a browser whose process runs but which answers
// nothing is as good as dead.
func (b *browser) answers() bool {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	_, err := chromedp.CallBrowser(ctx, cdpbrowser.GetVersion, cdp.Empty{})
	return err == nil
}

// stop closes the browser and kills its process group.
func (b *browser) stop() { b.shutDown(true) }

// kill kills the browser's processes without asking it to close first: for
// one that died or stopped answering, which would not answer the request.
func (b *browser) kill() { b.shutDown(false) }

// shutDown ends the browser once: when ask is set and it runs, it is asked
// to close (for 5 s at most); then its process group is killed and its
// directory removed.
func (b *browser) shutDown(ask bool) {
	b.stopOnce.Do(func() {
		cctx, ccancel := context.WithTimeout(b.ctx, 5*time.Second)
		if ask && b.alive() {
			chromedp.Cancel(cctx)
		}
		ccancel()
		b.cancel()
		if b.pid > 0 {
			syscall.Kill(-b.pid, syscall.SIGKILL)
		}
		b.allocCancel()
		// Kill, until none is left (for a few seconds at most), the
		// processes of the group and those that left it but name the
		// browser's directory (Chromium's crash handler starts its own
		// session).
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			left := b.processes()
			if len(left) == 0 {
				break
			}
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
		os.RemoveAll(b.dir)
	})
}

// processes returns the running processes of the browser: its process
// group and any process whose command line names its user data directory.
func (b *browser) processes() []int {
	var pids []int
	if b.pid > 0 {
		pids = groupMembers(b.pid)
	}
	want := []byte(b.dir)
	entries, err := os.ReadDir("/proc")
	if err != nil || b.dir == "" {
		return pids
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || slices.Contains(pids, pid) {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, want) {
			continue
		}
		if st := processState(pid); st != 0 && st != 'Z' && st != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processState returns the state letter of process pid (R, S, Z, ...), or 0
// when it does not exist.
func processState(pid int) byte {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2]
	}
	return 0
}

// groupMembers returns the processes of process group pgid that still run
// (zombies, which hold nothing but their pid, excluded).
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			if st := processState(pid); st != 0 && st != 'Z' && st != 'X' {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// guardScript runs before any script of every page: dialogs answer at once
// and window.open opens nothing.
const guardScript = `(() => {
	const w = window;
	w.alert = () => undefined;
	w.confirm = () => false;
	w.prompt = () => null;
	w.print = () => undefined;
	w.open = () => null;
})();`

// tab is one browser tab that renders pages one at a time.
type tab struct {
	b      *browser
	ctx    context.Context
	cancel context.CancelFunc
	r      *Renderer

	cur atomic.Pointer[pageReq] // the page being rendered

	qmu   sync.Mutex
	queue []any         // events for the worker
	wake  chan struct{} // signals the worker, capacity 1
}

// pageReq is the document a tab serves at url.
type pageReq struct {
	url    string
	html   []byte
	served atomic.Bool
}

// errBrowserHung is wrapped by newTab's error when the browser did not open
// the tab within the page timeout, though the caller had not given up: the
// browser no longer answers, and takeTab replaces it.
var errBrowserHung = errors.New("the browser did not answer")

// newTab opens a tab on b, ready for pages: its target created and
// attached, requests intercepted, dialogs reported, the viewport set. Each
// step waits on the browser for the page timeout at most, and for ctx.
func (b *browser) newTab(ctx context.Context, r *Renderer) (*tab, error) {
	tctx, cancel := chromedp.NewContext(b.ctx)
	t := &tab{b: b, ctx: tctx, cancel: cancel, r: r, wake: make(chan struct{}, 1)}
	sctx, scancel := context.WithTimeout(tctx, b.opts.Timeout)
	defer scancel()
	stop := context.AfterFunc(ctx, scancel)
	defer stop()
	fail := func(err error) (*tab, error) {
		cancel()
		if ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w within %v: %w", errBrowserHung, b.opts.Timeout, err)
		}
		return nil, err
	}
	// Listen creates the tab's target under tctx, which the target then
	// lives on (chromedp runs a target on the context of its first call),
	// so the bound on its creation is a watchdog that cancels tctx when
	// sctx ends first: a browser that never answers cannot hold the tab's
	// opening forever.
	watch := context.AfterFunc(sctx, cancel)
	err := chromedp.Listen(tctx, t.enqueue)
	if !watch() && err == nil {
		err = tctx.Err() // created just as the watchdog cancelled it
	}
	if err != nil {
		return fail(err)
	}
	go t.work()
	steps := []func() error{
		func() error {
			_, err := chromedp.Call(sctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}})
			return err
		},
		func() error {
			_, err := chromedp.Call(sctx, page.Enable, page.EnableParams{})
			return err
		},
		func() error {
			_, err := chromedp.Call(sctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: guardScript})
			return err
		},
		func() error {
			_, err := chromedp.Call(sctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
				Width: int64(b.opts.Width), Height: int64(b.opts.Height), DeviceScaleFactor: 1,
			})
			return err
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return fail(err)
		}
	}
	return t, nil
}

// enqueue is the tab's event listener: it only queues, as chromedp asks.
func (t *tab) enqueue(ev any) {
	switch ev.(type) {
	case *fetch.EventRequestPaused, *page.EventJavascriptDialogOpening:
	default:
		return
	}
	t.qmu.Lock()
	t.queue = append(t.queue, ev)
	t.qmu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// work answers the queued events until the tab closes: every request is
// failed except the page itself and placeholder images, and every dialog is
// dismissed.
func (t *tab) work() {
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.wake:
		}
		t.qmu.Lock()
		evs := t.queue
		t.queue = nil
		t.qmu.Unlock()
		for _, ev := range evs {
			t.answer(ev)
		}
	}
}

func (t *tab) answer(ev any) {
	ctx, cancel := context.WithTimeout(t.ctx, 10*time.Second)
	defer cancel()
	switch e := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{
			Accept: e.Type == page.DialogTypeBeforeunload,
		})
	case *fetch.EventRequestPaused:
		url := ""
		if e.Request != nil {
			url = e.Request.URL
		}
		if p := t.cur.Load(); p != nil && url == p.url && e.ResourceType == network.ResourceTypeDocument && p.served.CompareAndSwap(false, true) {
			chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
				RequestID:    e.RequestID,
				ResponseCode: 200,
				ResponseHeaders: []*fetch.HeaderEntry{
					{Name: "Content-Type", Value: "text/html; charset=utf-8"},
					{Name: "Cache-Control", Value: "no-store"},
				},
				Body: p.html,
			})
			return
		}
		if png, ok := t.r.placeholder(url); ok {
			chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
				RequestID:    e.RequestID,
				ResponseCode: 200,
				ResponseHeaders: []*fetch.HeaderEntry{
					{Name: "Content-Type", Value: "image/png"},
					{Name: "Access-Control-Allow-Origin", Value: "*"},
				},
				Body: png,
			})
			return
		}
		reason := network.ErrorReasonBlockedByClient
		if e.ResourceType == network.ResourceTypeDocument {
			// A navigation away (location = ..., a link, a form, a
			// reload) is aborted: the page stays as it was, with no
			// error page.
			reason = network.ErrorReasonAborted
		}
		chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: reason})
	}
}

// render loads html as the document of a fresh origin and takes its
// full-page screenshot, within the renderer's timeout.
func (t *tab) render(ctx context.Context, html string, seq uint64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.b.opts.Timeout)
	defer cancel()
	// Tie the call contexts to the tab too: chromedp finds the tab in the
	// context's values.
	cctx, ccancel := context.WithCancel(t.ctx)
	defer ccancel()
	stop := context.AfterFunc(ctx, ccancel)
	defer stop()

	// Each page has its own site, so that site isolation gives it its own
	// renderer process, and a page that hangs hangs no other.
	p := &pageReq{url: fmt.Sprintf("http://page%d.invalid/", seq), html: []byte(html)}
	t.cur.Store(p)
	nav, err := chromedp.Call(cctx, page.Navigate, page.NavigateParams{URL: p.url})
	if err != nil {
		return nil, t.failure(ctx, "navigating", err)
	}
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("navigating: %s", nav.ErrorText)
	}
	yes := true
	for {
		res, err := chromedp.Call(cctx, runtime.Evaluate, runtime.EvaluateParams{
			Expression:    `document.readyState === "complete" ? location.href : ""`,
			ReturnByValue: &yes,
		})
		if err != nil {
			return nil, t.failure(ctx, "waiting for the load", err)
		}
		if res.Result != nil && string(res.Result.Value) == `"`+p.url+`"` {
			break
		}
		select {
		case <-cctx.Done():
			return nil, t.failure(ctx, "waiting for the load", cctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	m, err := chromedp.Call(cctx, page.GetLayoutMetrics, cdp.Empty{})
	if err != nil {
		return nil, t.failure(ctx, "measuring the page", err)
	}
	w, h := float64(t.b.opts.Width), float64(t.b.opts.Height)
	if m.CSSContentSize != nil {
		w = math.Max(w, math.Ceil(m.CSSContentSize.Width))
		h = math.Max(h, math.Ceil(m.CSSContentSize.Height))
	}
	h = math.Min(h, float64(t.b.opts.MaxHeight))
	w = math.Min(w, float64(t.b.opts.MaxHeight))
	shot, err := chromedp.Call(cctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
		Format:                page.CaptureScreenshotFormatPng,
		Clip:                  &page.Viewport{Width: w, Height: h, Scale: 1},
		FromSurface:           &yes,
		CaptureBeyondViewport: &yes,
		OptimizeForSpeed:      &yes,
	})
	if err != nil {
		return nil, t.failure(ctx, "capturing the screenshot", err)
	}
	if len(shot.Data) == 0 {
		return nil, errors.New("capturing the screenshot: empty image")
	}
	return shot.Data, nil
}

// failure describes why a page failed, naming the timeout when it struck.
func (t *tab) failure(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: timed out after %v", what, t.b.opts.Timeout)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// close stops any script still running in the tab and closes it.
func (t *tab) close() {
	if t.b.alive() {
		ctx, cancel := context.WithTimeout(t.ctx, 2*time.Second)
		chromedp.Call(ctx, runtime.TerminateExecution, cdp.Empty{})
		cancel()
	}
	t.cancel()
}
