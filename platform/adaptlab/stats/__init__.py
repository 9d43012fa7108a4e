"""adaptlab.stats"""
