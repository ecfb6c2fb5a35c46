# Files under /etc are not for agents, whichever tool names them.
package toolgate.paths

deny contains {"msg": "paths under /etc are not for agents", "path": "/path"} if {
	input.protocol == "mcp"
	startswith(input.arguments.path, "/etc/")
}
