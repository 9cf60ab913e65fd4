"""Two-person approval of costly and destructive changes (issue 24): which changes need it (rules), the approval
request's life (state), and the desk that stores and runs it (desk). rules and state are pure."""
