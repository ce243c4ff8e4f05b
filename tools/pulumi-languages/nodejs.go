package main

// What pulumi-language-nodejs adds to host: installing a program's packages, running it, and writing the
// TypeScript of a PCL program (what `pulumi import` prints for the imported resources), as Pulumi's own host
// (sdk/nodejs/cmd/pulumi-language-nodejs/main.go) does, less its debugger attach, bun runtime, OOM hints,
// tracing and the monitor proxy and sync-invoke pipes (the SDK talks to the engine's monitor directly).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/google/shlex"
	hclsyntax "github.com/pulumi/pulumi/pkg/v3/codegen/hcl2/syntax"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/pcl"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/nodejs/npm"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/emptypb"
)

// exitAfterUserMessage is the SDK runner's exit code for "an error was already shown to the user".
const exitAfterUserMessage = 32

type nodeHost struct {
	*host
	cancelCtx context.Context // cancelled by the Cancel call, which ends a running program
	cancel    context.CancelFunc
}

func newNodeHost(base *host) *nodeHost {
	ctx, cancel := context.WithCancel(context.Background())
	return &nodeHost{host: base, cancelCtx: ctx, cancel: cancel}
}

// nodeOptions are the Pulumi.yaml `runtime: {name: nodejs, options: {...}}` settings.
type nodeOptions struct {
	typescript     bool
	tsconfig       string
	nodeargs       string
	packagemanager npm.PackageManagerType
	production     bool
}

func parseOptions(options map[string]any) (nodeOptions, error) {
	opts := nodeOptions{typescript: true, packagemanager: npm.AutoPackageManager}
	var ok bool
	if v, set := options["typescript"]; set {
		if opts.typescript, ok = v.(bool); !ok {
			return opts, errors.New("typescript option must be a boolean")
		}
	}
	if v, set := options["tsconfig"]; set {
		if opts.tsconfig, ok = v.(string); !ok {
			return opts, errors.New("tsconfigpath option must be a string")
		}
	}
	if v, set := options["nodeargs"]; set {
		if opts.nodeargs, ok = v.(string); !ok {
			return opts, errors.New("nodeargs option must be a string")
		}
	}
	if v, set := options["production"]; set {
		if opts.production, ok = v.(bool); !ok {
			return opts, errors.New("production option must be a boolean")
		}
	}
	if v, set := options["packagemanager"]; set {
		pm, _ := v.(string)
		switch opts.packagemanager = npm.PackageManagerType(pm); opts.packagemanager {
		case npm.AutoPackageManager, npm.NpmPackageManager, npm.YarnPackageManager, npm.PnpmPackageManager,
			npm.BunPackageManager:
		default:
			return opts, fmt.Errorf("packagemanager option must be one of auto, npm, yarn, pnpm or bun, got %q", v)
		}
	}
	return opts, nil
}

// InstallDependencies installs the program's packages with its package manager (npm install, or npm ci, yarn,
// pnpm, bun as npm.Install picks), in its npm/yarn workspace root if it is in one, streaming the output.
func (h *nodeHost) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest, server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	closer, stdout, stderr, err := rpcutil.MakeInstallDependenciesStreams(server, req.GetIsTerminal())
	if err != nil {
		return err
	}
	defer closer.Close()

	opts, err := parseOptions(req.GetInfo().GetOptions().AsMap())
	if err != nil {
		return fmt.Errorf("failed to parse options: %w", err)
	}
	fmt.Fprint(stdout, "Installing dependencies...\n\n")
	root := req.GetInfo().GetProgramDirectory()
	if workspace, err := npm.FindWorkspaceRoot(root); err == nil {
		fmt.Fprintf(stdout, "Detected workspace root at %s\n", workspace)
		root = workspace
	} else if !errors.Is(err, npm.ErrNotInWorkspace) {
		return fmt.Errorf("failure while trying to find workspace root: %w", err)
	}
	if _, err := npm.Install(server.Context(), opts.packagemanager, root, opts.production, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprint(stdout, "Finished installing dependencies\n\n")
	return closer.Close()
}

// Run runs the program with `node [nodeargs] <@pulumi/pulumi/cmd/run> <flags> <entry point> [args]`, the program's
// configuration in PULUMI_CONFIG and PULUMI_CONFIG_SECRET_KEYS, and reports how it ended.
func (h *nodeHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	info := req.GetInfo()
	opts, err := parseOptions(info.GetOptions().AsMap())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not find node on the $PATH: %s", err)}, nil
	}
	runPath := os.Getenv("PULUMI_LANGUAGE_NODEJS_RUN_PATH")
	if runPath == "" {
		runPath = "@pulumi/pulumi/cmd/run"
	}
	if runPath, err = locateModule(ctx, node, runPath, info.GetProgramDirectory()); err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}

	configJSON, err := nodeConfig(req.GetConfig())
	if err != nil {
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("failed to serialize configuration: %s", err)}, nil
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	secretKeysJSON, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "PULUMI_CONFIG="+configJSON, "PULUMI_CONFIG_SECRET_KEYS="+string(secretKeysJSON))
	if opts.typescript {
		env = append(env, "PULUMI_NODEJS_TYPESCRIPT=true")
	}
	if opts.tsconfig != "" {
		env = append(env, "PULUMI_NODEJS_TSCONFIG_PATH="+opts.tsconfig)
	}

	args, err := shlex.Split(opts.nodeargs)
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	args = append(args, runPath)
	flag := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, value)
		}
	}
	flag("monitor", req.GetMonitorAddress())
	flag("engine", h.engineAddress)
	flag("organization", req.GetOrganization())
	flag("project", req.GetProject())
	flag("root-directory", info.GetRootDirectory())
	flag("stack", req.GetStack())
	flag("pwd", info.GetProgramDirectory())
	if req.GetDryRun() {
		args = append(args, "--dry-run")
	}
	flag("parallel", strconv.Itoa(int(req.GetParallel())))
	args = append(args, info.GetEntryPoint()) // the engine passes "." for the program directory itself
	args = append(args, req.GetArgs()...)

	// End the program on the Cancel call or when the engine gives up on this call: interrupt, then kill.
	runCtx, cancel := context.WithCancel(h.cancelCtx)
	defer cancel()
	context.AfterFunc(ctx, cancel)
	cmd := exec.CommandContext(runCtx, node, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = env
	// Through pipes, not the files themselves: node may make its stdout/stderr non-blocking.
	cmd.Stdout, cmd.Stderr = struct{ io.Writer }{os.Stdout}, struct{ io.Writer }{os.Stderr}

	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exit) && exit.ExitCode() == exitAfterUserMessage:
		return &pulumirpc.RunResponse{Bail: true}, nil
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exit.ExitCode())}, nil
	case errors.As(err, &exit):
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited unexpectedly: %s", exit)}, nil
	default:
		return &pulumirpc.RunResponse{
			Error: fmt.Sprintf("Problem executing program (could not run language executor): %s", err),
		}, nil
	}
}

func (h *nodeHost) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.cancel()
	return &emptypb.Empty{}, nil
}

// locateModule is the path node resolves module to from the program's directory (so also a hoisted or workspace
// node_modules), or an error telling the user to install the program's packages.
func locateModule(ctx context.Context, node, module, programDir string) (string, error) {
	script := fmt.Sprintf(`try { console.log(require.resolve(%q)); } catch (error) { `+
		`if (error.code === "MODULE_NOT_FOUND") { console.error("It looks like the Pulumi SDK has not been installed. `+
		`Have you run pulumi install?"); } else { console.error(error.message); } process.exit(1); }`, module)
	cmd := exec.CommandContext(ctx, node, "-e", script)
	cmd.Dir = programDir
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return "", errors.New(string(exit.Stderr))
	} else if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// nodeConfig is the configuration as the SDK reads PULUMI_CONFIG: a JSON object, "{}" when there is none, with
// keys in the old <namespace>:config:<name> form, which all SDK versions understand.
func nodeConfig(cfg map[string]string) (string, error) {
	old := make(map[string]string, len(cfg))
	for k, v := range cfg {
		key, err := config.ParseKey(k)
		if err != nil {
			return "", err
		}
		old[key.Namespace()+":config:"+key.Name()] = v
	}
	out, err := json.Marshal(old)
	return string(out), err
}

// GenerateProgram turns a PCL program (`pulumi import` writes one for the resources it imported) into TypeScript.
func (h *nodeHost) GenerateProgram(
	_ context.Context, req *pulumirpc.GenerateProgramRequest,
) (*pulumirpc.GenerateProgramResponse, error) {
	client, err := schema.NewLoaderClient(req.GetLoaderTarget())
	if err != nil {
		return nil, err
	}
	defer client.Close()

	parser := hclsyntax.NewParser()
	for path, contents := range req.GetSource() {
		if err := parser.ParseFile(strings.NewReader(contents), path); err != nil {
			return nil, err
		}
		if parser.Diagnostics.HasErrors() {
			return nil, parser.Diagnostics
		}
	}
	options := []pcl.BindOption{pcl.PreferOutputVersionedInvokes}
	if !req.GetStrict() {
		options = append(options, pcl.NonStrictBindOptions()...)
	}
	program, diags, err := pcl.BindProgram(parser.Files, schema.NewCachedLoader(client), options...)
	if err != nil {
		return nil, err
	}
	response := &pulumirpc.GenerateProgramResponse{Diagnostics: plugin.HclDiagnosticsToRPCDiagnostics(diags)}
	if diags.HasErrors() {
		return response, nil
	}
	if program == nil {
		return nil, errors.New("internal error program was nil")
	}
	files, diags, err := nodejs.GenerateProgramWithOptions(program, nodejs.ProgramOptions{Runtime: "nodejs"})
	if err != nil {
		return nil, err
	}
	response.Source = files
	response.Diagnostics = append(response.Diagnostics, plugin.HclDiagnosticsToRPCDiagnostics(diags)...)
	return response, nil
}
