package daytonatest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// GPUTypes are the v0.205 OpenAPI document's GpuType values.
var GPUTypes = []string{"H100", "H200", "RTX-PRO-6000", "RTX-4090", "RTX-5090"}

// DefaultGPURunners are the GPU types the emulator has runners for unless SetGPURunners
// says otherwise.
var DefaultGPURunners = []string{"H100"}

// A Dockerfile's base image is found by the emulated registry unless its registry host
// is under the reserved top-level domain .invalid (RFC 2606), for example
// "example.invalid/nothing:1", or MissingImages names it: a build from such a base fails
// as a pull of an image that does not exist does.

// buildInputState is the emulator's state for declarative builds: object storage, the
// runners' GPU types and the images a pull does not find. Guarded by Server.mu.
type buildInputState struct {
	objects    map[string][]byte
	gpuRunners []string
	missing    []string
	users      map[string]string // ImageUser
	init       bool
}

func (s *Server) bis() *buildInputState {
	if !s.bi.init {
		s.bi = buildInputState{objects: map[string][]byte{}, gpuRunners: slices.Clone(DefaultGPURunners), init: true}
	}
	return &s.bi
}

// SetGPURunners sets the GPU types the emulator's runners have (none: no GPU runners).
func (s *Server) SetGPURunners(types ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bis().gpuRunners = slices.Clone(types)
}

// ImageUser says that image's configuration sets USER user, as the image in a registry
// would: builds FROM it start as that user and its sandboxes run as it (the emulator
// knows the platform image's user, daytona; any other image runs as root).
func (s *Server) ImageUser(image, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.bis()
	if st.users == nil {
		st.users = map[string]string{}
	}
	st.users[image] = user
}

// userOf is the user image runs as: ImageUser's, else imageUser's.
func (st *buildInputState) userOf(image string) string {
	if u, ok := st.users[image]; ok {
		return u
	}
	return imageUser(image)
}

// MissingImages makes builds FROM images fail as pulls of images that do not exist.
func (s *Server) MissingImages(images ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bis().missing = append(s.bis().missing, images...)
}

// pullable reports whether the emulated registry has image.
func (st *buildInputState) pullable(image string) bool {
	host, _, ok := strings.Cut(image, "/")
	if ok && (strings.HasSuffix(host, ".invalid") || strings.Contains(host, ".invalid:")) {
		return false
	}
	return !slices.Contains(st.missing, image)
}

// SnapshotInputs is what a snapshot was created with, beyond its name and resources.
type SnapshotInputs struct {
	GPU        int64
	GPUType    []string // as requested
	Entrypoint []string // as the snapshot reports it
	Dockerfile string
	// ContextHashes are buildInfo.contextHashes.
	ContextHashes []string
	// User is the user the built image runs as: the base image's, then the
	// Dockerfile's last USER (buildUsers; "" for a snapshot of an image, not built).
	User string
}

// SnapshotInputs returns the build inputs of the snapshot named name (ok false if none).
func (s *Server) SnapshotInputs(name string) (SnapshotInputs, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.findSnap(name)
	if sn == nil || sn.inputs == nil {
		return SnapshotInputs{}, false
	}
	in := sn.inputs
	return SnapshotInputs{GPU: in.GPU, GPUType: slices.Clone(in.GPUType), Entrypoint: slices.Clone(in.entrypoint),
		Dockerfile: sn.Dockerfile, ContextHashes: slices.Clone(in.contextHashes()), User: in.user}, true
}

// buildInputs is the whole CreateSnapshot body of the OpenAPI document, decoded strictly.
type buildInputs struct {
	Name         string   `json:"name"`
	ImageName    string   `json:"imageName"`
	Entrypoint   []string `json:"entrypoint"`
	CPU          int64    `json:"cpu"`
	GPU          int64    `json:"gpu"`
	GPUType      []string `json:"gpuType"`
	Memory       int64    `json:"memory"`
	Disk         int64    `json:"disk"`
	RegionID     string   `json:"regionId"`
	SandboxClass string   `json:"sandboxClass"`
	BuildInfo    *struct {
		DockerfileContent string   `json:"dockerfileContent"`
		ContextHashes     []string `json:"contextHashes"`
	} `json:"buildInfo"`

	// Set by applyBuildInputs.
	resolvedGPU string
	// user is the USER the built image runs as (buildUsers).
	user string
	// dockerfile is what the runner builds: buildInfo's, or a context file's that
	// replaces it (applyBuildInputs).
	dockerfile string
	entrypoint []string
	steps      []buildStep
}

func (in *buildInputs) contextHashes() []string {
	if in.BuildInfo == nil {
		return nil
	}
	return in.BuildInfo.ContextHashes
}

var unknownFieldRE = regexp.MustCompile(`json: unknown field "([^"]+)"`)

// readBuildInputs decodes POST /snapshots strictly (a property the DTO does not declare
// is refused, stricter than v0.190, whose ValidationPipe ignores it: decodeStrict; gpuType
// values must be GpuType values, as class-validator's IsEnum checks), and puts the body
// back for createSnapshot's own decoding.
func (s *Server) readBuildInputs(w http.ResponseWriter, r *http.Request) (*buildInputs, bool) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeErr(w, r, http.StatusBadRequest, "invalid body: "+err.Error())
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var in buildInputs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		if m := unknownFieldRE.FindStringSubmatch(err.Error()); m != nil {
			writeErr(w, r, http.StatusBadRequest, "property "+m[1]+" should not exist")
			return nil, false
		}
		writeErr(w, r, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return nil, false
	}
	for _, t := range in.GPUType {
		if !slices.Contains(GPUTypes, t) {
			writeErr(w, r, http.StatusBadRequest, "each value in gpuType must be one of the following values: "+strings.Join(GPUTypes, ", "))
			return nil, false
		}
	}
	if in.GPU < 0 {
		writeErr(w, r, http.StatusBadRequest, "gpu must not be less than 0")
		return nil, false
	}
	return &in, true
}

// applyBuildInputs checks what a runner would check of a valid request and records in on
// sn, answering the error itself (false) when the request is refused:
//   - gpu > 0 needs a runner with one of the preferred GPU types, else 400 "No available
//     runners with GPU type: ..." (or "No available runners" without a preference), as
//     v0.190 apps/api/src/sandbox/services/runner.service.ts getRandomAvailableRunner
//     answers snapshot.service.ts resolveSnapshotGpuType; the snapshot gets the runner's type;
//   - a build's entrypoint is its Dockerfile's last ENTRYPOINT, else `sleep infinity`
//     (snapshot.service.ts getEntrypointFromDockerfile);
//   - a build whose base the emulator does not know, or whose context hash was never
//     uploaded, is accepted and then fails, as the runner's build does
//     (apps/runner/pkg/docker/image_build.go: "failed to get tar from storage with hash").
func (s *Server) applyBuildInputs(w http.ResponseWriter, r *http.Request, sn *snap, in *buildInputs) bool {
	st := s.bis()
	if in.GPU > 0 {
		var pick string
		for _, t := range in.GPUType {
			if slices.Contains(st.gpuRunners, t) {
				pick = t
				break
			}
		}
		switch {
		case len(in.GPUType) > 0 && pick == "":
			writeErr(w, r, http.StatusBadRequest, "No available runners with GPU type: "+strings.Join(in.GPUType, ", ")+".")
			return false
		case len(in.GPUType) == 0 && len(st.gpuRunners) == 0:
			writeErr(w, r, http.StatusBadRequest, "No available runners")
			return false
		case pick == "":
			pick = st.gpuRunners[0]
		}
		in.resolvedGPU = pick
	}
	for _, e := range in.Entrypoint {
		if strings.TrimSpace(e) != "" {
			in.entrypoint = append(in.entrypoint, e)
		}
	}
	sn.inputs = in
	if in.BuildInfo == nil {
		return true
	}
	// The runner writes the API's Dockerfile into the build context first and every
	// context file after it by name, so a context file named Dockerfile replaces it
	// (v0.190 apps/runner/pkg/docker/image_build.go:45-118; docker builds "Dockerfile",
	// :161-163).
	dockerfile := in.BuildInfo.DockerfileContent
	if files, err := s.contextFiles(in.BuildInfo.ContextHashes); err == nil {
		if b, ok := files["Dockerfile"]; ok {
			dockerfile = string(b)
		}
	}
	in.dockerfile = dockerfile
	in.entrypoint = dockerfileEntrypoint(dockerfile)
	base, steps := parseDockerfile(dockerfile)
	in.steps = steps
	if sn.fail != nil {
		return true
	}
	switch {
	case base == "":
		sn.fail = &failure{reason: "Failed to build the image: the Dockerfile has no FROM instruction",
			log: "ERROR: failed to solve: no build stage in current context"}
	case !st.pullable(base):
		sn.fail = &failure{reason: "Failed to build the image: pull access denied for " + base +
			", repository does not exist or may require authorization",
			log: "ERROR: failed to solve: " + base + ": not found"}
	}
	if sn.fail == nil {
		user, f := buildUsers(dockerfile, st.userOf)
		in.user, sn.fail = user, f
	}
	for _, h := range in.BuildInfo.ContextHashes {
		if _, ok := st.objects[contextKey(h)]; !ok && sn.fail == nil {
			sn.fail = &failure{reason: "failed to get tar from storage with hash " + h + ": The specified key does not exist.",
				log: "ERROR: failed to get tar from storage with hash " + h}
		}
	}
	return true
}

// imageUser is the user a base image runs as: `daytona` for Daytona's sandbox image,
// whose Dockerfile ends with `USER daytona` (v0.190 images/sandbox/Dockerfile:96), else
// root, Docker's default for an image that sets no USER (the emulator knows no other
// image's configuration).
func imageUser(base string) string {
	repo := base
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	repo, _, _ = strings.Cut(repo, "@")
	if repo == "daytonaio/sandbox" || strings.HasSuffix(repo, "/daytonaio/sandbox") {
		return "daytona"
	}
	return "root"
}

// buildUsers follows a Dockerfile's USER lines from each base image's user and checks
// each RUN line (and the script inside the RUN the daytona package generates for a
// build_script, base64 in an `echo ... | base64 -d`) against the user it runs as: the
// runner hands the Dockerfile unchanged to `docker build` (v0.190
// apps/runner/pkg/docker/image_build.go:46-56, 161-197), so a RUN runs as the last USER
// before it. The emulator does not run build RUN lines as another user (its local box
// runs every command as one unprivileged user); it models the common case instead: a
// command that needs root (rootOnly) fails the build unless the user is root. It
// returns the image's final user, or the failure, which is Docker's BuildKit message for
// a RUN that exits non-zero.
func buildUsers(dockerfile string, userOf func(image string) string) (string, *failure) {
	var fail *failure
	user := walkUsers(dockerfile, userOf, func(kw, rest, user string) bool {
		if kw != "RUN" || user == "root" || user == "0" {
			return true
		}
		cmd := rest
		for _, sub := range b64RunRE.FindAllStringSubmatch(rest, -1) {
			if b, err := base64.StdEncoding.DecodeString(sub[1]); err == nil {
				cmd += "\n" + string(b)
			}
		}
		if what := rootOnly(cmd); what != "" {
			fail = &failure{
				reason: `Failed to build the image: process "/bin/sh -c ` + rest + `" did not complete successfully: exit code: 1`,
				log:    "ERROR: " + what + ": Permission denied (RUN as user " + user + ", not root)"}
			return false
		}
		return true
	})
	return user, fail
}

// walkUsers calls fn with each instruction of a Dockerfile (its keyword upper-cased, the
// rest trimmed) and the user it runs as: a FROM starts from its base image's user
// (userOf), a USER sets it. fn returning false stops the walk. It returns the user at the
// end (at the stop).
func walkUsers(dockerfile string, userOf func(image string) string, fn func(kw, rest, user string) bool) string {
	user := "root"
	for _, l := range sandbox.DockerfileInstructions(dockerfile) {
		kw, rest, _ := strings.Cut(l, " ")
		kw, rest = strings.ToUpper(kw), strings.TrimSpace(rest)
		switch kw {
		case "FROM":
			base, _, _ := strings.Cut(rest, " ")
			user = userOf(base)
		case "USER":
			if u, _, _ := strings.Cut(rest, ":"); u != "" {
				user = u
			}
		}
		if !fn(kw, rest, user) {
			break
		}
	}
	return user
}

var (
	// pkgManagerRE: package managers that write the system's package database.
	pkgManagerRE = regexp.MustCompile(`^(apt-get|apt|dpkg|apk|yum|dnf|microdnf|useradd|groupadd|adduser|update-ca-certificates)$`)
	// rootPathRE: paths only root may write in an image. /usr/local/lib and
	// /usr/local/share/nvm are daytona's in the platform image (v0.190
	// images/sandbox/Dockerfile:81-82,87).
	rootPathRE = regexp.MustCompile(`^/(usr|etc|opt|var|root|srv|lib|lib64|bin|sbin)(/|$)`)
	userPathRE = regexp.MustCompile(`^/usr/local/(lib|share/nvm)(/|$)`)
	// shellSplitRE splits a command line into simple commands.
	shellSplitRE = regexp.MustCompile(`&&|\|\||[;|\n()]`)
	// writeCmdRE: commands whose path arguments they write.
	writeCmdRE = regexp.MustCompile(`^(mkdir|touch|cp|mv|ln|install|chmod|chown|rm|tee|sed)$`)
	redirectRE = regexp.MustCompile(`>>?\s*(\S+)`)
)

// rootOnly names what in a shell command needs root ("" for nothing): a package
// manager, a write (redirection, mkdir, cp, tee, ...) to a system path. A command run
// with sudo (the platform image's daytona has passwordless sudo,
// images/sandbox/Dockerfile:78) needs nothing.
func rootOnly(cmd string) string {
	system := func(p string) bool {
		p = strings.Trim(p, `"'`)
		return rootPathRE.MatchString(p) && !userPathRE.MatchString(p)
	}
	for _, c := range shellSplitRE.Split(cmd, -1) {
		f := strings.Fields(c)
		if len(f) == 0 || f[0] == "sudo" {
			continue
		}
		for _, m := range redirectRE.FindAllStringSubmatch(c, -1) {
			if system(m[1]) {
				return "cannot create " + strings.Trim(m[1], `"'`)
			}
		}
		if pkgManagerRE.MatchString(f[0]) {
			return f[0] + ": are you root?"
		}
		if writeCmdRE.MatchString(f[0]) {
			for _, a := range f[1:] {
				if system(a) {
					return f[0] + ": " + strings.Trim(a, `"'`)
				}
			}
		}
	}
	return ""
}

// addTo adds the recorded inputs to a SnapshotDto.
func (in *buildInputs) addTo(d map[string]any) {
	if in == nil {
		return
	}
	d["gpu"] = in.GPU
	if in.resolvedGPU != "" {
		d["gpuType"] = in.resolvedGPU
	}
	if len(in.entrypoint) > 0 {
		d["entrypoint"] = in.entrypoint
	}
	if bi, ok := d["buildInfo"].(map[string]any); ok && len(in.contextHashes()) > 0 {
		bi["contextHashes"] = in.contextHashes()
	}
}

var entrypointRE = regexp.MustCompile(`ENTRYPOINT\s+(.*)`)

// dockerfileEntrypoint follows snapshot.service.ts getEntrypointFromDockerfile (v0.190).
func dockerfileEntrypoint(dockerfile string) []string {
	m := entrypointRE.FindAllStringSubmatch(dockerfile, -1)
	if len(m) == 0 {
		return []string{"sleep", "infinity"}
	}
	raw := strings.TrimSpace(m[len(m)-1][1])
	var arr []string
	if err := json.Unmarshal([]byte(raw), &arr); err == nil {
		return arr
	}
	return []string{strings.NewReplacer(`"`, "", `'`, "").Replace(raw)}
}

// buildStep is a RUN (run) or a COPY/ADD from the context (src, dst) of a Dockerfile; dir
// is the WORKDIR it runs in ("/" when none is set, Docker's default).
type buildStep struct{ run, src, dst, dir string }

// parseDockerfile returns a Dockerfile's first base image and the RUN and COPY/ADD steps
// the emulator replays in each new sandbox (provision). Other instructions are ignored,
// and so is the RUN that the daytona package generates for a build_script.
func parseDockerfile(dockerfile string) (base string, steps []buildStep) {
	dir := "/"
	for _, l := range sandbox.DockerfileInstructions(dockerfile) {
		kw, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(kw) {
		case "FROM":
			if base == "" {
				base, _, _ = strings.Cut(rest, " ")
			}
			dir = "/"
		case "WORKDIR":
			dir = path.Join(dir, rest) // a relative WORKDIR is relative to the last one
		case "RUN":
			// The RUN of a build script that the daytona package generates is not
			// replayed: sandboxes of image + build_script snapshots start as the
			// release, as they always have in the emulator.
			// Nor is one that only gives /workspace to a user, or one that needs root
			// (useradd, a package manager: rootOnly), which buildUsers judged against
			// its user: the local box runs sandboxes as one unprivileged user, and the
			// users and the workspace's owner are modelled instead (workspaceOwner).
			if !b64RunRE.MatchString(rest) && !chownOnlyRE.MatchString(rest) && rootOnly(rest) == "" {
				steps = append(steps, buildStep{run: rest, dir: dir})
			}
		case "COPY", "ADD":
			f := strings.Fields(rest)
			if len(f) == 2 && !strings.HasPrefix(f[0], "--") {
				steps = append(steps, buildStep{src: f[0], dst: f[1], dir: dir})
			}
		}
	}
	return base, steps
}

// provision replays a Dockerfile snapshot's steps in the new sandbox id: the emulator's
// stand-in for the image layers a real build makes. A RUN runs with /bin/sh in its
// WORKDIR when the box serves it (servedDir), else in the box's default directory; COPY and ADD copy context
// files, a relative destination being relative to the WORKDIR, as in Docker. Called with
// mu held.
func (s *Server) provision(bx box, id string, sn *snap) error {
	in := sn.inputs
	if in == nil || len(in.steps) == 0 {
		return nil
	}
	files, err := s.contextFiles(in.contextHashes())
	if err != nil {
		return err
	}
	for _, st := range in.steps {
		if st.run != "" {
			cwd := ""
			if served(st.dir) {
				cwd = st.dir
			}
			res, err := bx.exec(context.Background(), id, st.run, cwd, nil, execLimit)
			if err != nil {
				return fmt.Errorf("RUN %s: %w", st.run, err)
			}
			if res.code != 0 || res.timedOut {
				return fmt.Errorf("RUN %s: exit code %d: %s", st.run, res.code, res.out)
			}
			continue
		}
		if err := copyStep(bx, id, files, st); err != nil {
			return err
		}
	}
	return nil
}

func copyStep(bx box, id string, files map[string][]byte, st buildStep) error {
	src := path.Clean(st.src)
	dst := st.dst
	if !path.IsAbs(dst) {
		dst = path.Join(st.dir, dst)
		if strings.HasSuffix(st.dst, "/") || st.dst == "." {
			dst += "/"
		}
	}
	n := 0
	for name, b := range files {
		var to string
		switch {
		case src == ".":
			to = path.Join(dst, name)
		case name == src && !strings.HasSuffix(st.dst, "/"):
			to = dst
		case name == src:
			to = path.Join(dst, path.Base(name))
		case strings.HasPrefix(name, src+"/"):
			to = path.Join(dst, strings.TrimPrefix(name, src+"/"))
		default:
			continue
		}
		if err := writeAnywhere(bx, id, to, b); err != nil {
			return fmt.Errorf("COPY %s %s: %w", st.src, st.dst, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("COPY %s %s: %s: not found in the build context", st.src, st.dst, st.src)
	}
	return nil
}

// writeAnywhere writes a file of a build step: through the box's file calls where they
// serve the path, else by a command (the local box serves file calls in servedDir only,
// while its commands write the sandbox's overlays, /opt, /usr, /etc...).
func writeAnywhere(bx box, id, p string, b []byte) error {
	err := bx.write(id, p, bytes.NewReader(b))
	if !errors.Is(err, errBadPath) {
		return err
	}
	q := "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
	cmd := "mkdir -p \"$(dirname " + q + ")\" && echo " + base64.StdEncoding.EncodeToString(b) + " | base64 -d > " + q
	res, err := bx.exec(context.Background(), id, cmd, "", nil, execLimit)
	if err == nil && (res.code != 0 || res.timedOut) {
		err = fmt.Errorf("exit %d: %s", res.code, res.out)
	}
	return err
}

// contextFiles merges the uploaded context tarballs, as the runner does.
func (s *Server) contextFiles(hashes []string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, h := range hashes {
		tr := tar.NewReader(bytes.NewReader(s.bis().objects[contextKey(h)]))
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading context %s: %w", h, err)
			}
			if hdr.Typeflag == tar.TypeDir {
				continue
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			files[path.Clean(hdr.Name)] = b
		}
	}
	return files, nil
}
