package sandboxtest

import "strings"

// HostileScript fills a sandbox's workspace with what the product documents' failure
// test places there (issue 27), in one exec of a few seconds: a 10 GB sparse file
// (big.img), a 100,000-file directory (many/1 ... many/100000), the names of
// HostileNames, a symlink loop (loop1, loop2), a link to itself (self) and links to ".."
// (up) and "/" (root). Tests of every reader of a workspace (the runtimes, the tools,
// the API, the CLI) start from it.
const HostileScript = `set -e
truncate -s 10G big.img
mkdir many && cd many && seq 1 100000 | xargs touch && cd ..
printf x > "$(printf 'new\nline')"; printf x > "quo\"te's"; printf x > ...; printf x > ..x
printf x > "$(head -c 255 /dev/zero | tr '\0' n)"; printf x > "$(printf 'bad\377\376')"
printf x > "$(printf 'esc\033[2J\342\200\256txt')"
ln -s loop2 loop1; ln -s loop1 loop2; ln -s self self; ln -s .. up; ln -s / root`

// HostileNames are the regular files HostileScript makes at the top of the workspace
// besides big.img, as the bytes of their names, each holding "x": a newline, quotes,
// dots, 255 bytes, invalid UTF-8, and a terminal escape with a right-to-left override.
var HostileNames = []string{"new\nline", `quo"te's`, "...", "..x", strings.Repeat("n", 255), "bad\xff\xfe", "esc\x1b[2J\u202etxt"}

// HostileLinks are the symlinks HostileScript makes.
var HostileLinks = []string{"loop1", "loop2", "self", "up", "root"}
