package frontend

import "regexp"

// Patterns of the page in an agent reply and of the image addresses the
// reference rewrites. Go's \w is ASCII-only, where Python's is Unicode; the
// query strings the first pattern matches are ASCII in practice.
var (
	htmlPattern     = regexp.MustCompile(`(?s)<html.*?>.*?</html>`)
	bodyPattern     = regexp.MustCompile(`(?s)<body.*?>.*?</body>`)
	unsplashPattern = regexp.MustCompile(`https://source\.unsplash\.com/random/(\d+)x(\d+)/\?[\w=]+`)
	picsumPattern   = regexp.MustCompile(`https://picsum\.photos/(\d+)/(\d+)`)
)

// PlaceholderImageURL is the form every image address of a page is
// rewritten to: picsum's image 48 at the requested width and height, the
// one image the agent's prompt allows.
const PlaceholderImageURL = "https://picsum.photos/id/48/$1/$2"

// RewriteImageURLs rewrites the image addresses of text as the reference
// does before looking for a page: random Unsplash images
// (https://source.unsplash.com/random/WxH/?query) and plain picsum images
// (https://picsum.photos/W/H) both become PlaceholderImageURL of the same
// size.
func RewriteImageURLs(text string) string {
	text = unsplashPattern.ReplaceAllString(text, PlaceholderImageURL)
	return picsumPattern.ReplaceAllString(text, PlaceholderImageURL)
}

// ExtractHTML returns the page an agent reply proposes, as the reference
// finds it: after RewriteImageURLs, the first shortest span from "<html"
// to "</html>"; when there is none, the first shortest span from "<body"
// to "</body>". Tags are matched case-sensitively. ok is false when the
// reply holds neither.
func ExtractHTML(reply string) (page string, ok bool) {
	reply = RewriteImageURLs(reply)
	if m := htmlPattern.FindString(reply); m != "" {
		return m, true
	}
	if m := bodyPattern.FindString(reply); m != "" {
		return m, true
	}
	return "", false
}
