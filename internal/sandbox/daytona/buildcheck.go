package daytona

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// GPUTypes are the GPU types a snapshot may ask for: the GpuType values of Daytona's
// OpenAPI document (v0.205). Which of them an organization's runners have is known only
// when the snapshot is created (400 "No available runners with GPU type: ...").
var GPUTypes = []string{"H100", "H200", "RTX-PRO-6000", "RTX-4090", "RTX-5090"}

// MaxGPU is the most GPUs a Daytona snapshot, and so each of its sandboxes, may have:
// CreateSnapshotDto's gpu is @Max(1) (apps/api/src/sandbox/dto/create-snapshot.dto.ts:
// 69-73, v0.190; CreateSandboxDto's too), so a larger count is a 400 "gpu must not be
// greater than 1" at apply.
const MaxGPU = 1

// checkBuildInputs reports, without reading anything remote, the build inputs Daytona
// would refuse: more than MaxGPU GPUs, a gpu_type it does not know, a gpu_type without a
// gpu (Daytona ignores it), and a Dockerfile that does not start from an image.
func checkBuildInputs(env sandbox.EnvironmentSpec) []sandbox.Problem {
	var ps []sandbox.Problem
	s := env.Spec
	if s.GPU > MaxGPU {
		ps = append(ps, sandbox.Problem{Attribute: "gpu", Summary: "Too Many GPUs",
			Detail: fmt.Sprintf("Environment %q asks for gpu = %d, but Daytona allows at most %d GPU per sandbox and refuses the snapshot otherwise. Set gpu = %d.",
				env.Name, s.GPU, MaxGPU, MaxGPU)})
	}
	if s.GPUType != "" && !slices.Contains(GPUTypes, s.GPUType) {
		ps = append(ps, sandbox.Problem{Attribute: "gpu_type", Summary: "Unknown GPU Type",
			Detail: fmt.Sprintf("Environment %q asks for gpu_type = %q, which Daytona does not offer. Use one of %s, or remove gpu_type to take any GPU the organization's runners have.",
				env.Name, s.GPUType, strings.Join(GPUTypes, ", "))})
	}
	if s.GPUType != "" && s.GPU <= 0 {
		ps = append(ps, sandbox.Problem{Attribute: "gpu_type", Summary: "GPU Type Without GPUs",
			Detail: fmt.Sprintf("Environment %q sets gpu_type = %q but no gpu count; Daytona places a snapshot by GPU type only when it asks for GPUs. Set gpu to the number of GPUs, or remove gpu_type.",
				env.Name, s.GPUType)})
	}
	if s.Dockerfile != "" && sandbox.CheckDockerfile(s.Dockerfile) != nil {
		ps = append(ps, sandbox.Problem{Attribute: "dockerfile", Summary: "Dockerfile Without A Base Image",
			Detail: fmt.Sprintf("The Dockerfile of environment %q does not start with a FROM instruction (ARG lines and comments may come before it). "+
				"Start it with `FROM <image:tag>`, or `FROM %s` for trueforge's platform image.", env.Name, sandbox.PlatformImage)})
	}
	return ps
}
