// Command pulumi-language-python is the language host the pulumi CLI starts to run this project's Python
// programs: it answers the engine's LanguageRuntime calls and runs each program through the SDK's own
// pulumi-language-python-exec script, placed beside this binary by build.sh.
//
// Pulumi's own host (module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is not served by
// the Go module proxy this project can reach, so this one implements what `pulumi preview/up/refresh/destroy`
// need: Handshake, GetPluginInfo, GetRequiredPlugins/Packages (none: plugins come with the CLI build) and Run;
// for `pulumi package gen-sdk --language python`, GeneratePackage with pkg/v3's Python code generator; and
// RunPlugin, for a plugin run from its source folder (tools/plugin/source).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	pycodegen "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// exitAfterUserMessage is the exec script's exit code for "an error was already shown to the user".
const exitAfterUserMessage = 32

var version = "dev"

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
	execScript    string
}

func main() {
	engineAddress := ""
	for _, arg := range os.Args[1:] {
		if !strings.HasPrefix(arg, "-") {
			engineAddress = arg // the engine passes flags first, its own address last
		}
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	server := &host{
		engineAddress: engineAddress,
		execScript:    filepath.Join(filepath.Dir(self), "pulumi-language-python-exec"),
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Init: func(s *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(s, server)
			return nil
		},
	})
	if err != nil {
		fail(err)
	}
	fmt.Printf("%d\n", handle.Port) // the engine reads the port from the first line
	if err := <-handle.Done; err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
	os.Exit(1)
}

func (h *host) Handshake(
	_ context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.engineAddress = req.GetEngineAddress()
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *host) GetRequiredPlugins(
	context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(
	context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) GetProgramDependencies(
	context.Context, *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return &pulumirpc.GetProgramDependenciesResponse{}, nil
}

// Run runs the program with the project's Python (its virtualenv option, else python3) and reports how it ended.
func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	root, program := req.GetPwd(), req.GetProgram()
	if info := req.GetInfo(); info != nil {
		root = info.GetRootDirectory()
		program = filepath.Join(info.GetProgramDirectory(), info.GetEntryPoint())
	}
	// A stack without configuration comes as a nil map, which would marshal as null: the SDK needs an object.
	configMap, secretKeyList := req.GetConfig(), req.GetConfigSecretKeys()
	if configMap == nil {
		configMap = map[string]string{}
	}
	if secretKeyList == nil {
		secretKeyList = []string{}
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	secretKeys, err := json.Marshal(secretKeyList)
	if err != nil {
		return nil, err
	}
	args := []string{
		"-u", h.execScript,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", req.GetPwd(),
		"--dry_run=" + strconv.FormatBool(req.GetDryRun()),
		"--parallel", strconv.Itoa(int(req.GetParallel())),
		"--monitor", req.GetMonitorAddress(),
		"--engine", h.engineAddress,
		"--organization", req.GetOrganization(),
		"--root_directory", root,
		program,
	}
	cmd := exec.CommandContext(ctx, python(root, req.GetInfo().GetOptions().AsMap()), append(args, req.GetArgs()...)...)
	cmd.Dir = req.GetPwd()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secretKeys))
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exit) && exit.ExitCode() == exitAfterUserMessage:
		return &pulumirpc.RunResponse{Bail: true}, nil
	case errors.As(err, &exit):
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exit.ExitCode())}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run the Python program: %v", err)}, nil
	}
}

// python is the interpreter of the `virtualenv` runtime option (relative to the project root), else python3.
func python(root string, options map[string]any) string {
	if venv, ok := options["virtualenv"].(string); ok && venv != "" {
		if !filepath.IsAbs(venv) {
			venv = filepath.Join(root, venv)
		}
		return filepath.Join(venv, "bin", "python")
	}
	if cmd := os.Getenv("PULUMI_PYTHON_CMD"); cmd != "" {
		return cmd
	}
	return "python3"
}

// GeneratePackage writes the Python SDK of the request's schema into its directory, as Pulumi's own host does:
// the schema bound with the engine's schema loader, binding problems returned as diagnostics, not as an error.
func (h *host) GeneratePackage(
	_ context.Context, req *pulumirpc.GeneratePackageRequest,
) (*pulumirpc.GeneratePackageResponse, error) {
	client, err := schema.NewLoaderClient(req.GetLoaderTarget())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	loader := schema.NewCachedLoader(client)

	var spec schema.PackageSpec
	if err := json.Unmarshal([]byte(req.GetSchema()), &spec); err != nil {
		return nil, err
	}
	pkg, diags, err := schema.BindSpec(spec, loader, schema.ValidationOptions{AllowDanglingReferences: true})
	if err != nil {
		return nil, err
	}
	response := &pulumirpc.GeneratePackageResponse{Diagnostics: plugin.HclDiagnosticsToRPCDiagnostics(diags)}
	if diags.HasErrors() {
		return response, nil
	}

	files, err := pycodegen.GeneratePackage("pulumi-language-python", pkg, req.GetExtraFiles(), loader)
	if err != nil {
		return nil, err
	}
	for name, data := range files {
		path := filepath.Join(req.GetDirectory(), name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("could not create output directory %s: %w", filepath.Dir(name), err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("could not write output file %s: %w", name, err)
		}
	}
	return response, nil
}

// RunPlugin runs a plugin written in Python from its source folder (a PulumiPlugin.yaml with runtime python,
// named by a program's `plugins:` in Pulumi.yaml), as Pulumi's own host does for a folder with a __main__.py:
// `python <folder> <args>` in the engine's working directory, with the folder's virtualenv option (else
// python3), its output streamed back to the engine, which reads the plugin's port from it.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	info := req.GetInfo()
	folder := info.GetProgramDirectory()
	if _, err := os.Stat(filepath.Join(folder, "__main__.py")); err != nil {
		return fmt.Errorf("plugin %s has no __main__.py: %w", folder, err)
	}
	cmd := exec.CommandContext(server.Context(), python(info.GetRootDirectory(), info.GetOptions().AsMap()),
		append([]string{"-u", folder}, req.GetArgs()...)...)
	cmd.Dir = req.GetPwd()
	cmd.Env = append(os.Environ(), req.GetEnv()...)
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return server.Send(&pulumirpc.RunPluginResponse{
				Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(exit.ExitCode())},
			})
		}
		return err
	}
	return closer.Close()
}
