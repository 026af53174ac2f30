package agent

import "fmt"

// ErrorCode is the code of a job's failure as a runner reports it (the
// `code` of POST /api/worker/fail, docs/api.md).
type ErrorCode string

// The codes the runners report.
const (
	// CodeBadInput: the job's input is not what the runner takes.
	CodeBadInput ErrorCode = "bad_input"
	// CodeRequested: the input asked the sleep runner to fail.
	CodeRequested ErrorCode = "requested"
	// CodeInputDownload: an input object could not be downloaded.
	CodeInputDownload ErrorCode = "input_download"
	// CodeInputRead: an input file could not be read.
	CodeInputRead ErrorCode = "input_read"
	// CodeOutputUpload: an output could not be uploaded.
	CodeOutputUpload ErrorCode = "output_upload"
	// CodeWorkdir: the job's working directory could not be made.
	CodeWorkdir ErrorCode = "workdir"
	// CodeRunnerError: the runner failed without saying how.
	CodeRunnerError ErrorCode = "runner_error"
	// CodeExecStart: the command could not be started.
	CodeExecStart ErrorCode = "exec_start"
	// CodeExecWait: the command could not be waited for.
	CodeExecWait ErrorCode = "exec_wait"
	// CodeExitBadInput: the command exited 65 (EX_DATAERR): its input is bad, no retry helps.
	CodeExitBadInput ErrorCode = "exit_65"
	// CodeComfyUIBusy: every ComfyUI server of the machine is busy.
	CodeComfyUIBusy ErrorCode = "comfyui_busy"
	// CodeComfyUIUnreachable: ComfyUI does not answer.
	CodeComfyUIUnreachable ErrorCode = "comfyui_unreachable"
	// CodeComfyUIError: ComfyUI answered an HTTP call with an error.
	CodeComfyUIError ErrorCode = "comfyui_error"
	// CodeComfyUIUpload: ComfyUI refused an input upload.
	CodeComfyUIUpload ErrorCode = "comfyui_upload"
	// CodeComfyUIValidation: ComfyUI refused the workflow.
	CodeComfyUIValidation ErrorCode = "comfyui_validation"
	// CodeComfyUIMissingModel: the workflow names a model the machine does not have.
	CodeComfyUIMissingModel ErrorCode = "comfyui_missing_model"
	// CodeComfyUIPromptLost: ComfyUI lost the prompt (it restarted).
	CodeComfyUIPromptLost ErrorCode = "comfyui_prompt_lost"
	// CodeComfyUIOOM: ComfyUI ran out of GPU memory.
	CodeComfyUIOOM ErrorCode = "comfyui_oom"
	// CodeComfyUIExecution: ComfyUI failed to execute the workflow.
	CodeComfyUIExecution ErrorCode = "comfyui_execution"
	// CodeComfyUIInterrupted: ComfyUI interrupted the prompt on its own.
	CodeComfyUIInterrupted ErrorCode = "comfyui_interrupted"
	// CodeComfyUIMissingOutputs: output nodes produced nothing.
	CodeComfyUIMissingOutputs ErrorCode = "comfyui_missing_outputs"
	// CodeComfyUINoOutputs: the workflow saved no output file.
	CodeComfyUINoOutputs ErrorCode = "comfyui_no_outputs"
	// CodeComfyUITooManyOutputs: more output files than output URLs.
	CodeComfyUITooManyOutputs ErrorCode = "comfyui_too_many_outputs"
)

// exitCode is the code of a command that exited n (other than 65).
func exitCode(n int) ErrorCode { return ErrorCode(fmt.Sprintf("exit_%d", n)) }
