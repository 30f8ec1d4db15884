package events

// KindSkillLoaded: load_skill wrote a skill's files into the session's sandbox.
const KindSkillLoaded = "skill_loaded"

// SkillLoaded records a skill written into a sandbox: which version, where, and into
// which sandbox (and generation), so that a later load_skill in the same sandbox returns
// without writing it again, and a replaced sandbox gets it anew.
type SkillLoaded struct {
	Name       string `json:"name"`
	Digest     string `json:"digest"`
	SandboxID  string `json:"sandbox_id"`
	Generation int64  `json:"generation"`
	// Path is the skill's folder, relative to the sandbox's workspace.
	Path  string `json:"path"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
	// ReadOnly: the folder was made read-only in the sandbox (chmod a-w), which a
	// runtime without a shell may not allow.
	ReadOnly bool `json:"read_only"`
}

func (SkillLoaded) Kind() string { return KindSkillLoaded }

// Registered here rather than in the table of events.go, beside the payload it reads.
func init() { decoders[KindSkillLoaded] = plain[SkillLoaded] }
