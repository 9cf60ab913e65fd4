"""The App Home tab: what each person sees there (facts, render) and its refresh after a change (refresh)."""
