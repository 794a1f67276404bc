package frontend

import "testing"

func TestExtractHTML(t *testing.T) {
	for _, tc := range []struct {
		name, reply, page string
		ok                bool
	}{
		{"none", "What colour do you like?", "", false},
		{"html", "Here:\n<html>\n<body>Hi</body>\n</html>\nThoughts?", "<html>\n<body>Hi</body>\n</html>", true},
		{"html with attributes", `x <html lang="en"><p>a</p></html> y`, `<html lang="en"><p>a</p></html>`, true},
		{"first of two", "<html>one</html> and <html>two</html>", "<html>one</html>", true},
		{"shortest span", "<html>a</html></html>", "<html>a</html>", true},
		{"body only", `see <body class="bg-white"><h1>T</h1></body> ok`, `<body class="bg-white"><h1>T</h1></body>`, true},
		{"html preferred over an earlier body", "<body>b</body> <html>h</html>", "<html>h</html>", true},
		{"unclosed html falls back to body", "<html><body>b</body>", "<body>b</body>", true},
		{"unclosed", "<html><p>cut off", "", false},
		{"upper case is not matched", "<HTML>x</HTML>", "", false},
		{"picsum rewritten", `<html><img src="https://picsum.photos/200/300"></html>`, `<html><img src="https://picsum.photos/id/48/200/300"></html>`, true},
		{"unsplash rewritten", `<html><img src="https://source.unsplash.com/random/640x480/?bread"></html>`, `<html><img src="https://picsum.photos/id/48/640/480"></html>`, true},
		{"id 48 kept", `<html><img src="https://picsum.photos/id/48/10/20"></html>`, `<html><img src="https://picsum.photos/id/48/10/20"></html>`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, ok := ExtractHTML(tc.reply)
			if page != tc.page || ok != tc.ok {
				t.Errorf("ExtractHTML(%q) = %q, %v; want %q, %v", tc.reply, page, ok, tc.page, tc.ok)
			}
		})
	}
}
