"""Config files of every kind, as the CLI sees them: which model validates which file, and the
generated reference page. The models themselves live with their packages; the loading rules in
`core.config`."""
