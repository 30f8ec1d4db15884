package provider

import (
	"os"
	"runtime/debug"
)

// TuneProcess applies the provider plugin's process settings. Call it once, first thing in
// main, before the plugin server starts.
func TuneProcess() {
	quietUnreadLogs()
	lessGC()
}

// quietUnreadLogs turns off the plugin SDK's own trace logging when Terraform was not
// asked for logs (no TF_LOG or TF_LOG_PROVIDER). Terraform discards those lines anyway,
// but the framework formats and ships one per attribute, which made a plan over 400
// resources spend a quarter of the provider's CPU on logs nobody reads. An explicit
// TF_LOG_SDK* setting always wins.
func quietUnreadLogs() {
	if os.Getenv("TF_LOG") != "" || os.Getenv("TF_LOG_PROVIDER") != "" || os.Getenv("TF_ACC_LOG_PATH") != "" || os.Getenv("TF_LOG_PATH") != "" {
		return
	}
	for _, v := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"} {
		if os.Getenv(v) == "" {
			os.Setenv(v, "OFF")
		}
	}
}

// lessGC trades memory for CPU. A plan sends every resource through several RPCs whose
// decoding allocates heavily and briefly (the framework's reflection and tftypes walks),
// so at the default GOGC=100 a large plan spent about a third of the provider's CPU in the
// collector. The heap of a provider stays small (tens of MB at 400 resources), so a
// fourfold growth target costs little. An explicit GOGC always wins.
func lessGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
