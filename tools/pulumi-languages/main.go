// Command pulumi-languages is installed by build.sh under two names, pulumi-language-nodejs and pulumi-language-go:
// the language plugins the pulumi CLI starts for `pulumi package gen-sdk --language L` and, for Node.js, for
// running TypeScript/JavaScript programs. The name it is started under picks the language.
//
// Pulumi's own language hosts (modules github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3 and
// github.com/pulumi/pulumi/sdk/go/pulumi-language-go/v3) are not served by the Go module proxy this project can
// reach; pkg/v3 and sdk/v3 are. So these hosts implement, from those two modules, the calls this project needs, the
// way Pulumi's own hosts do:
//
//   - both: GeneratePackage (bind the schema with the engine's schema loader, run the language's code
//     generator, write its files), Handshake, GetPluginInfo, GetRequiredPlugins/Packages (none) and
//     GetProgramDependencies (none);
//   - nodejs also: InstallDependencies (npm, yarn, pnpm or bun, as the project chooses), Run (the program through
//     the SDK's own runner, @pulumi/pulumi/cmd/run, TypeScript through ts-node), Cancel, and GenerateProgram (the
//     TypeScript `pulumi import` prints) (nodejs.go).
//
// No C# SDK: the .NET code generator left pkg/v3 for pulumi-dotnet (its last pkg/v3 release with codegen/dotnet is
// v3.225.1), and Pulumi's own .NET host generates it (docs/how-to/other-languages.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

var version = "dev"

// generator produces an SDK's files (path relative to the output directory -> contents) as the language's real
// host calls its code generator.
type generator func(
	pkg *schema.Package, req *pulumirpc.GeneratePackageRequest, loader schema.ReferenceLoader,
) (map[string][]byte, error)

var generators = map[string]generator{
	"nodejs": func(pkg *schema.Package, req *pulumirpc.GeneratePackageRequest, loader schema.ReferenceLoader,
	) (map[string][]byte, error) {
		return nodejs.GeneratePackage("pulumi-language-nodejs", pkg, req.GetExtraFiles(), req.GetLocalDependencies(),
			req.GetLocal(), loader)
	},
	"go": func(pkg *schema.Package, req *pulumirpc.GeneratePackageRequest, _ schema.ReferenceLoader,
	) (map[string][]byte, error) {
		if len(req.GetExtraFiles()) > 0 {
			return nil, errors.New("overlays are not supported for Go")
		}
		return gogen.GeneratePackage("pulumi-language-go", pkg, req.GetLocalDependencies())
	},
}

// host is what both languages answer alike.
type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	language      string
	engineAddress string
}

func main() {
	language := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(os.Args[0]), "pulumi-language-"), ".exe")
	if generators[language] == nil {
		fail(fmt.Errorf("started as %q: expected pulumi-language-nodejs or -go", os.Args[0]))
	}
	if len(os.Args) == 2 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(version)
		return
	}
	base := &host{language: language}
	if n := len(os.Args); n > 1 && !strings.HasPrefix(os.Args[n-1], "-") {
		base.engineAddress = os.Args[n-1] // the engine passes flags first, its own address last
	}
	var server pulumirpc.LanguageRuntimeServer = base
	if language == "nodejs" {
		server = newNodeHost(base)
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
	fmt.Fprintf(os.Stderr, "pulumi-language host: %v\n", err)
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

// GeneratePackage writes the SDK of the request's schema into its directory, as Pulumi's own hosts do: binding
// problems come back as diagnostics, not as an error.
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

	files, err := generators[h.language](pkg, req, loader)
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
