"""adaptlab.analysis"""
